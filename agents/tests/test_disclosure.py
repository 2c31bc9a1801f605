import pytest

from agents.disclosure import TEMPLATES, disclosure_for
from agents.models import DisclosureTemplate

LANGUAGES = ("en-US", "es-ES", "es-US", "it-IT")


@pytest.mark.parametrize("language", LANGUAGES)
def test_every_template_exists_in_every_supported_language_with_a_version(language):
    texts = set()
    for template in DisclosureTemplate.values:
        disclosure = disclosure_for(template_id=template, language=language, agent_name="Ava")
        assert disclosure.language == language
        assert disclosure.version.startswith(f"{language}.{template}.")
        assert disclosure.text.endswith(".") and len(disclosure.text) < 140
        texts.add(disclosure.text)
    assert len(texts) == len(DisclosureTemplate.values)


@pytest.mark.parametrize("template", ["named_agent", "named_virtual_assistant"])
@pytest.mark.parametrize("language", LANGUAGES)
def test_named_templates_insert_the_agents_name(template, language):
    assert "Ava Lopez" in disclosure_for(template_id=template, language=language, agent_name="  Ava   Lopez ").text


@pytest.mark.parametrize("template", ["standard", "assistant_of", "virtual_assistant"])
def test_unnamed_templates_do_not_carry_a_name(template):
    assert "Ava" not in disclosure_for(template_id=template, language="en-US", agent_name="Ava").text


def test_other_languages_fall_back_to_english():
    disclosure = disclosure_for(template_id="standard", language="fr-FR", agent_name="Ava")
    assert disclosure.language == "en-US"
    assert disclosure.text == TEMPLATES["en-US"]["standard"][1]


def test_spanish_variants_differ_and_are_spanish():
    spain = disclosure_for(template_id="standard", language="es-ES", agent_name="x").text
    us = disclosure_for(template_id="standard", language="es-US", agent_name="x").text
    assert spain != us
    assert "inteligencia artificial" in spain and "inteligencia artificial" in us
