"""Reports to hand over: the Markdown report (``markdown``), its redaction (``redact``) and the
startup timeline as SVG (``timeline``), each built from plain values (``model``)."""
