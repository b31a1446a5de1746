"""Tests of `bringup run` and `bringup watch` (the live supervisor)."""
