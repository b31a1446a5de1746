"""``tools/message_extract.py`` reads a failure site's message as the program prints it: the
cases below are self-written snippets in the shapes engines use (not copied from any engine)."""

from __future__ import annotations

import sys
from pathlib import Path

TOOLS = Path(__file__).resolve().parents[2] / "tools"
sys.path.insert(0, str(TOOLS))
try:
    import message_extract as mx
    import message_patterns as mp
    import message_rows as mr
finally:
    sys.path.remove(str(TOOLS))


def templates(text: str, lang: str) -> list[tuple[str, str]]:
    return [(s.kind, mp.template_text(s.template)) for s in mx.regex_sites("x", text, lang)]


def test_a_printf_conversion_split_by_an_inttypes_macro_is_one_value():
    src = 'void f() {\n  GGML_LOG_ERROR("%s: block count %" PRIu64 " is above %" PRId64 "\\n", a, b);\n}\n'
    assert templates(src, "cpp") == [("GGML_LOG_ERROR", "{}: block count {} is above {}\n")]


def test_cpp_string_concatenation_and_wrappers_are_read_whole():
    src = """
void g() {
    throw std::runtime_error("shard '" + name + "' has no header");
    throw std::runtime_error(std::string("could not map ") + path + " for reading");
    throw std::invalid_argument(string_format("bad width: %d", w));
    throw std::runtime_error("percent %d is kept as written");
    LOG_ERR("first half of a line, "
            "second half %s\\n", x);
}
"""
    assert templates(src, "cpp") == [
        ("LOG_ERR", "first half of a line, second half {}\n"),
        ("throw", "shard '{}' has no header"),
        ("throw", "could not map {} for reading"),
        ("throw", "bad width: {}"),
        ("throw", "percent %d is kept as written"),  # a thrown text is no format
    ]


def test_a_message_that_is_only_a_value_is_no_site():
    src = 'void h() { throw std::runtime_error(e.what()); LLAMA_LOG_ERROR("%s", msg); }\n'
    assert templates(src, "cpp") == []


def test_rust_format_args_owned_strings_and_continued_lines():
    src = """
fn check(n: usize) -> Result<(), E> {
    return Err(E::Validation(format!(
        "`split` asks for {n} parts but the device count is lower"
    )));
    return Err(E::Validation("`parts` cannot be zero".to_string()));
    panic!("a long message \\
            goes on here {}", n);
}
"""
    assert templates(src, "rust") == [
        ("panic", "a long message goes on here {}"),
        ("err", "`split` asks for {} parts but the device count is lower"),
        ("err", "`parts` cannot be zero"),
    ]


def test_go_errorf_keeps_its_prefix_and_a_pure_wrap_is_listed_apart():
    src = """
func load() error {
	return fmt.Errorf("could not read the layer table: %w", err)
	return fmt.Errorf("%s: %w", name, err)
	return fmt.Errorf("%w", err)
	return errors.New("no " + "accelerator answered")
}
"""
    assert templates(src, "go") == [
        ("errorf", "could not read the layer table: {}"),
        ("wrap", "{}: {}"),
        ("errors.New", "no accelerator answered"),
    ]
    rows = mr.build_rows("ollama", "0", mx.regex_sites("llm/x.go", src, "go"))
    cov = mr.coverage(rows)
    assert (cov["sites"], cov["wraps"]) == (2, 1)
    assert [r.load for r in rows if r.kind == "wrap"] == [False]


def test_python_module_constant_formatted_at_the_raise():
    src = """
NEEDS = "{} needs the fused kernels."
def pick(sharded):
    if sharded:
        raise NotImplementedError(NEEDS.format("A sharded model"))
"""
    (site,) = mx.python_sites("m.py", src)
    assert mp.template_text(site.template) == "{} needs the fused kernels."


def test_a_camel_case_api_name_counts_its_words():
    assert mp.words("cuDeviceGetCount failed") == 5
    pattern, _ = mp.pattern_of(mp.parse_template("cuDeviceOpen failed: {}"))
    assert pattern is not None
    pattern, why = mp.pattern_of(mp.parse_template("open failed: {}"))
    assert pattern is None
    assert "too little" in why
