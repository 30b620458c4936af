"""Names with lower-case words or initials inside them (``van der``, ``de``, ``dos``,
``Klaus-D.``), form values (``Name on the account: ...``) and two-word sign-offs are replaced
whole: no surname is left behind after a role word, a form label or a dash. (Each shape was a
canary value that survived, in CI or in a 1,000-seed sweep of the canaries.) The precision
side: a company after a name in running text, a street named like a person, and a bulleted
list, stay."""

from __future__ import annotations

import pytest

from infra.settings import CurateSettings
from tasks.pii.engine import PiiConfig, anonymize_texts, load_engine

pytestmark = pytest.mark.integration

CONFIG = PiiConfig.from_settings(CurateSettings())


def _one(text: str) -> str:
    return anonymize_texts(load_engine(CONFIG), [text])[0].text


@pytest.mark.parametrize(
    ("text", "words"),
    [
        # a CI run's canary: "Schlauchin" survived after "Name on the account:"
        (
            "Please update my profile. Name on the account: Grzegorz auch Schlauchin, "
            "date of birth 1990-01-02.",
            ["Grzegorz", "Schlauchin"],
        ),
        ("Name on the account: Hugo van der Dussen, please check.", ["Hugo", "Dussen"]),
        # a canary of a 2,000-seed sweep: a given name that is also a word ("else")
        (
            "Please update my profile. Name on the account: Else Budig, date of birth 1980-01-02.",
            ["Else", "Budig"],
        ),
        ("Account holder: Will Okafor\nsort code 20-00-00", ["Will", "Okafor"]),
        # and a surname that is one (a canary of the same sweep)
        ("Can you check the order for the customer Blanaid May? Reach them", ["Blanaid", "May"]),
        ("the passenger Tomasz Will, seat 14C, asked again", ["Tomasz", "Will"]),
        ("the emergency contact is Inès de Lacy and she is my aunt", ["Inès", "Lacy"]),
        ("passenger Maria dos Santos missed the connection", ["Maria", "Santos"]),
        ("Card holder: Siobhán Ó Corra\nexpiry 04/29", ["Siobhán", "Corra"]),
        ("Name on the account: Klaus-D. Ebert, date of birth 1971-05-02", ["Klaus", "Ebert"]),
        ("the patient is John F. Whitcombe, room 12", ["John", "Whitcombe"]),
        ("check the order for the customer H.-Dieter Barth? Reach them", ["Dieter", "Barth"]),
        ("customer J. R. Hartley called about the book", ["Hartley"]),
        ("Please refund to my card when it is done.\n— Rhys King", ["Rhys", "King"]),
        ("write to me when it is done.\n— Karl Heinz van der Dussen", ["Karl", "Dussen"]),
        # a person who shares a brand's name, introducing themselves
        ("Hi, this is Raymond James. My card was charged twice.", ["Raymond", "James"]),
        # CI-18's canary: a surname that is also a street's word, after "this is"
        ("Hi, this is Grace Lane. My card was charged twice.", ["Grace", "Lane"]),
        ("I'm Faith Street, the tenant of flat 4", ["Faith", "Street"]),
        # a canary of a 1,000-seed sweep: an initial before a hyphenated given name, signing off
        ("write to me when it is done.\n— H.-Dieter Lübs", ["Dieter", "Lübs"]),
        # canaries of a 3,000-seed sweep: a surname that is also a team's word in a form field,
        # and one the tagger reads as a plural noun (its form says surname)
        ("Name on the account: Régulo Sales, date of birth 19.01.1994", ["Régulo", "Sales"]),
        ("the order for the customer Dervla O'Dea? Reach them", ["Dervla", "O'Dea"]),
        ("the order for the customer Aoife McCrae? Reach them", ["Aoife", "McCrae"]),
    ],
)
def test_a_name_with_particles_leaves_no_part_behind(text: str, words: list[str]) -> None:
    out = _one(text)
    assert "<PERSON>" in out
    assert not [w for w in words if w in out], out


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("customer Dana Whitfield at Walmart wants a refund for the blender", "Walmart"),
        ("passenger Maria Santos, flying to Rio de Janeiro on Friday", "Rio de Janeiro"),
        ("Dana asked what we cover:\n- Refunds\n- Returns\n- Store Credit", "- Store Credit"),
        ("Dana moved her IRA to Raymond James last year", "Raymond James"),
        ("Dana asked us to ship it to Grace Lane instead", "Grace Lane"),
        ("Dana wrote the steps:\n- A. Open the app", "A. Open the app"),
        ("Dana, name on the account: Marketing Dept, please", "Marketing Dept"),
    ],
)
def test_what_follows_a_name_in_running_text_stays(text: str, kept: str) -> None:
    out = _one(text)
    assert "Dana" not in out and "Maria" not in out
    assert kept in out, out
