"""relayc.parse, relayc.check, Module.astext, relayc.__version__."""

import re

import pytest

import relayc
import relay_programs as P


def test_version_is_a_version_string():
    assert isinstance(relayc.__version__, str)
    assert re.fullmatch(r"\d+\.\d+\.\d+.*", relayc.__version__), relayc.__version__


def test_parse_returns_a_module_whose_text_is_the_program():
    module = relayc.parse(P.ADD)
    assert isinstance(module, relayc.Module)
    text = module.astext()
    assert isinstance(text, str)
    assert "def @main" in text
    assert "add(%x, %y)" in text
    assert "Tensor[(2, 3), float32]" in text


def test_str_of_a_module_is_its_text():
    module = relayc.parse(P.ADT)
    assert str(module) == module.astext()


def test_astext_parses_back_to_the_same_text():
    for program in (P.ADD, P.ADT, P.REFS, P.CLOSURES, P.SCALARS_AND_TUPLES):
        text = relayc.parse(program).astext()
        assert relayc.parse(text).astext() == text


def test_astext_keeps_type_definitions():
    text = relayc.parse(P.ADT).astext()
    assert "type List[A]" in text
    assert "Cons(A, List[A])" in text
    assert "type Option[A]" in text


def test_parse_type_checks():
    # parse() type-checks too: an ill-typed module is a TypeCheckError, not a Module.
    with pytest.raises(relayc.TypeCheckError):
        relayc.parse(P.ILL_TYPED)


def test_parse_error_names_the_file_and_points_at_the_token():
    with pytest.raises(relayc.ParseError) as info:
        relayc.parse(P.BAD_SYNTAX, name="broken.relay")
    err = info.value
    assert err.code == "relay::parse::unexpected_token"
    assert "broken.relay" in err.rendered
    assert "unexpected `{`" in err.rendered
    assert "unexpected `{`" in str(err)


def test_parse_default_name_is_model_relay():
    with pytest.raises(relayc.ParseError) as info:
        relayc.parse(P.BAD_SYNTAX)
    assert "model.relay" in info.value.rendered


def test_parse_of_empty_or_garbage_text():
    with pytest.raises(relayc.ParseError):
        relayc.parse("def @main(")
    with pytest.raises(relayc.ParseError):
        relayc.parse("%%%% not relay")


def test_check_of_a_well_typed_program_returns_no_warnings():
    assert relayc.check(P.ADD) == []
    assert relayc.check(relayc.parse(P.ADT)) == []


def test_check_returns_rendered_warnings():
    for source in (P.NON_EXHAUSTIVE, relayc.parse(P.NON_EXHAUSTIVE)):
        warnings = relayc.check(source)
        assert isinstance(warnings, list)
        assert len(warnings) == 1, warnings
        assert all(isinstance(w, str) for w in warnings)
        assert "does not cover `Nil`" in warnings[0]


def test_check_of_an_ill_typed_program_raises_type_check_error():
    with pytest.raises(relayc.TypeCheckError) as info:
        relayc.check(P.ILL_TYPED, name="shapes.relay")
    err = info.value
    assert err.code == "relay::type::operator"
    assert "cannot broadcast" in err.rendered
    assert "Tensor[(2), float32]" in err.rendered and "Tensor[(3), float32]" in err.rendered
    assert "shapes.relay" in err.rendered


def test_check_of_bad_syntax_raises_parse_error():
    with pytest.raises(relayc.ParseError):
        relayc.check(P.BAD_SYNTAX)


def test_check_rejects_what_is_not_a_module_or_text():
    # The binding raises relayc.Error (not TypeError) for a source of another type.
    with pytest.raises((TypeError, relayc.Error)) as info:
        relayc.check(42)
    assert "check()" in str(info.value)
