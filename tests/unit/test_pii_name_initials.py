"""A given name written with an initial glued to it by a hyphen, as German and French writers
shorten double names ("H.-Dieter" for Hans-Dieter, "J.-Pierre"), after a self-introduction, a
sign-off or a dash: the whole name is taken, as "Hans-Dieter Rosenow" is. A curate run lost
such a canary ("Hi, this is H.-Dieter Rosenow.", Faker's de_DE list writes the name so;
FLYWHEEL_CURATE__CANARY_SEED=6319434739698333504). On the precision side: initials that name
no one ("H.-O." of a model railway's scale, a brand after "this is"). Sentences written for this
test."""

from __future__ import annotations

import pytest

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine
from tasks.pii.names.greetings import lower_case_name_spans


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("Hi, this is H.-Dieter Rosenow. My card was charged twice.", "H.-Dieter Rosenow"),
        ("Kind regards,\nH.-Dieter Rosenow", "H.-Dieter Rosenow"),
        ("Thanks for the quick fix!\n— J.-Pierre Lavaux", "J.-Pierre Lavaux"),
        ("im h.-dieter rosenow, the parcel is late", "h.-dieter rosenow"),
    ],
)
def test_a_given_name_after_its_initial_is_taken_whole(text: str, name: str) -> None:
    assert name in {text[s:e] for s, e in lower_case_name_spans(text)}


@pytest.mark.parametrize(
    "text",
    ["This is H.-O. Scale modelling club news", "Hi, this is J. Crew support, how can I help?"],
)
def test_initials_that_name_no_one_are_left(text: str) -> None:
    assert lower_case_name_spans(text) == []


def test_the_canary_a_curate_run_lost_is_anonymised() -> None:
    engine = load_engine(PiiConfig.from_settings(CurateSettings()))
    text = "Hi, this is H.-Dieter Rosenow. My card 4972215011340817 was charged twice."
    (red,) = anonymize_texts(engine, [text])
    assert "Rosenow" not in red.text and "Dieter" not in red.text
    assert red.text.startswith("Hi, this is ") and "was charged twice." in red.text
