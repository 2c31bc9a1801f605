"""Documents and questions for the retrieval tests and bench/knowledge_bench.py.

- The help centre: four Markdown documents with `#` headings and 36 questions.
- Three short documents as users upload them (knowledge/tests/fixtures/): a hotel FAQ in plain text
  (a title line, five questions with their answers), a restaurant menu in Markdown and a guest policy
  as a two-page PDF (policy.txt holds its lines; a blank line starts the second page).

A question comes with text found in the chunk that answers it.
"""

from __future__ import annotations

import re
from pathlib import Path

from testing.pdfs import text_pdf

FIXTURES = Path(__file__).resolve().parents[1] / "knowledge" / "tests" / "fixtures"

SHIPPING = """# Shipping and delivery

## Delivery times
Orders placed before 2 pm on a weekday leave our Leeds warehouse the same day.
Standard delivery within the United Kingdom takes two to four working days.

## Express delivery
Express delivery arrives the next working day and costs 9.95 pounds.
Express is not available for bikes, because they ship on a pallet.

## International shipping
We ship to Ireland, France, Germany, Spain and the Netherlands.
International parcels take five to eight working days and customs duties are included in the price.

## Tracking your parcel
A tracking link is emailed as soon as your parcel is handed to the courier.
If the tracking page has not changed for three days, contact us and we open an investigation.
"""

RETURNS = """# Returns and refunds

## Return window
You can return unused items within 45 days of delivery.
Items must be in their original packaging with all labels attached.

## How to start a return
Log in, open the order and choose Start a return; print the prepaid label and drop the parcel at any post office.

## Refund timing
Refunds are issued to the original payment method within seven days of the item reaching our warehouse.
Store credit is issued instantly if you prefer it.

## Damaged or wrong items
If an item arrives damaged or is not what you ordered, send photos within 48 hours and we send a replacement for free.

## Items that cannot be returned
Personalised frames, used helmets and opened tubes of chain lubricant cannot be returned for hygiene and safety reasons.
"""

PRODUCTS = """# Product guide

## Trailblazer 29 mountain bike
The Trailblazer 29 has an aluminium frame, a 12-speed drivetrain and hydraulic disc brakes.
It weighs 13.4 kilograms in size medium.

## Commuter E5 electric bike
The Commuter E5 has a 500 Wh battery that gives up to 90 kilometres of assistance.
A full charge takes about five hours with the supplied charger.

## Battery care
Store the battery between 10 and 25 degrees Celsius and charge it to about 60 percent before winter storage.
Never leave the battery in a car on a hot day.

## Error codes on the E5 display
Error E-21 means the speed sensor is not detecting the wheel magnet; check the magnet alignment.
Error E-37 means the battery temperature is too high; stop riding and let it cool down.
Error E-52 means the motor controller lost communication; switch the bike off and on again.

## Frame sizes
Riders from 155 to 170 centimetres tall fit size small; 170 to 185 centimetres fit medium; taller riders need large.
"""

ACCOUNT = """# Account, payments and warranty

## Payment methods
We accept Visa, Mastercard, American Express, PayPal and Klarna.
Klarna lets you pay in three interest-free instalments.

## Changing your password
Open Account settings, choose Security and pick a new password; we email you a confirmation.

## Warranty
Every frame carries a lifetime warranty for the original owner.
Components such as brakes and gears are covered for two years against manufacturing defects.

## Servicing
A free first service is included within 90 days of purchase at any partner workshop.

## Store opening hours
Our Leeds showroom opens Monday to Saturday from 9 am to 6 pm and is closed on Sundays.

## Contact
Call us on 0113 496 0000 or use the chat on our website between 8 am and 8 pm.
"""

HELP_CENTRE = (SHIPPING, RETURNS, PRODUCTS, ACCOUNT)

HELP_QUESTIONS = [
    ("How long does standard delivery take in the UK?", "two to four working days"),
    ("If I order at 1 pm on Tuesday, when does it ship?", "before 2 pm on a weekday"),
    ("How much is next-day delivery?", "9.95 pounds"),
    ("Can I get my bike delivered express?", "Express is not available for bikes"),
    ("Do you deliver to Germany?", "Germany"),
    ("Will I pay customs duties on an order to Spain?", "customs duties are included"),
    ("How do I track my order?", "tracking link is emailed"),
    ("My tracking hasn't updated in days, what should I do?", "has not changed for three days"),
    ("How many days do I have to send something back?", "within 45 days"),
    ("Do items need their original packaging to be returned?", "original packaging"),
    ("How do I start a return?", "prepaid label"),
    ("When will I get my money back?", "within seven days"),
    ("Can I get store credit instead of a refund?", "Store credit is issued instantly"),
    ("My order arrived broken, what now?", "arrives damaged"),
    ("Can I return a used helmet?", "used helmets"),
    ("What brakes does the Trailblazer 29 have?", "hydraulic disc brakes"),
    ("How heavy is the Trailblazer mountain bike?", "13.4 kilograms"),
    ("What is the range of the Commuter E5?", "90 kilometres"),
    ("How long does it take to charge the electric bike battery?", "five hours"),
    ("How should I store the battery over winter?", "60 percent"),
    ("Is it ok to leave the battery in a hot car?", "hot day"),
    ("What does E-21 mean?", "E-21"),
    ("The display shows E-37", "E-37"),
    ("What should I do about error E-52?", "E-52"),
    ("What frame size do I need if I am 180 cm tall?", "170 to 185 centimetres"),
    ("Which credit cards do you accept?", "Mastercard"),
    ("Can I pay in instalments?", "Klarna lets you pay"),
    ("How do I change my password?", "pick a new password"),
    ("Is there a warranty on the frame?", "lifetime warranty"),
    ("How long are gears and brakes covered?", "two years against manufacturing defects"),
    ("Is the first service free?", "free first service"),
    ("Is the showroom open on Sunday?", "closed on Sundays"),
    ("What is your phone number?", "0113 496 0000"),
    ("When is the chat available?", "between 8 am and 8 pm"),
    ("What gearing does the Trailblazer have?", "12-speed drivetrain"),
    ("How big is the E5 battery?", "500 Wh"),
]


def help_centre_as_one_text() -> str:
    """The four help-centre documents as one long plain-text file: headings are bare lines."""
    return "\n\n".join(re.sub(r"(?m)^#+\s+", "", document) for document in HELP_CENTRE)


HOTEL_FAQ = (FIXTURES / "hotel-faq.txt").read_text(encoding="utf-8")
MENU = (FIXTURES / "menu.md").read_text(encoding="utf-8")
POLICY_PAGES = [page.splitlines() for page in (FIXTURES / "policy.txt").read_text(encoding="utf-8").split("\n\n")]

HOTEL_TITLE = "Seaview Hotel - Frequently Asked Questions"
MENU_TITLE = "Trattoria Sole - Menu"
POLICY_TITLE = "Seaview Hotel Guest Policy"
POLICY_HEADINGS = ["Cancellation", "Deposits", "Smoking", "Quiet hours", "Damage", "Children"]


def titles_and_headings() -> list[str]:
    """Every document title and heading line of the documents here."""
    markdown = [heading for text in (*HELP_CENTRE, MENU) for heading in re.findall(r"(?m)^#+\s+(.+)$", text)]
    return [HOTEL_TITLE, POLICY_TITLE, *POLICY_HEADINGS, *markdown]


def policy_pdf() -> bytes:
    return text_pdf(POLICY_PAGES)


def uploads() -> list[tuple[str, bytes]]:
    """The three short documents as files (name, bytes)."""
    return [
        ("hotel-faq.txt", HOTEL_FAQ.encode()),
        ("menu.md", MENU.encode()),
        ("policy.pdf", policy_pdf()),
    ]


HOTEL_QUESTIONS = [
    ("Where can I park?", "underground garage"),
    ("Can I leave my car at the hotel?", "underground garage"),
    ("When is dinner served?", "dinner from 6 to 10 pm"),
    ("What time is breakfast?", "breakfast from 7 to 10 am"),
    ("Is there a pool?", "heated indoor pool"),
    ("Do you provide towels for swimming?", "Towels are provided"),
    ("When do I have to check out?", "Check-out is at 11 am"),
    ("Can I stay in my room until 1 pm?", "late check-out"),
    ("Are pets allowed?", "Dogs and cats are welcome"),
    ("Can I bring my cat?", "Dogs and cats are welcome"),
]
MENU_QUESTIONS = [
    ("How much is the tiramisu?", "Tiramisu"),
    ("Do you have vegetarian pasta?", "Pumpkin ravioli"),
    ("Can I get a gluten-free pizza?", "gluten-free base"),
    ("What wine do you have?", "House red or white wine"),
    ("Is the pasta homemade?", "made fresh every morning"),
    ("What starters are there?", "Bruschetta"),
    ("Do you have a spicy pizza?", "Diavola"),
    ("How much is an espresso?", "Espresso - 2 euros"),
    ("What desserts do you have?", "Panna cotta"),
]
POLICY_QUESTIONS = [
    ("Can I cancel my booking for free?", "free of charge until 48 hours"),
    ("What happens if I do not show up?", "no-shows"),
    ("Do I have to pay a deposit?", "deposit of 30 percent"),
    ("Can I smoke in my room?", "non-smoking"),
    ("What are the quiet hours?", "10 pm to 7 am"),
    ("What happens if I break something in the room?", "damage to the room"),
    ("Do children stay for free?", "Children under six"),
    ("Do you have a cot for my baby?", "Cots and high chairs"),
]
SHORT_QUESTIONS = HOTEL_QUESTIONS + MENU_QUESTIONS + POLICY_QUESTIONS


def _words(text: str) -> str:
    return " ".join(re.findall(r"[a-z0-9]+", text.lower()))


def says(spoken: str, answer: str) -> bool:
    """Whether a spoken answer holds `answer` (case, punctuation and Markdown marks aside)."""
    return _words(answer) in _words(spoken)


def speaks_a_heading(spoken: str) -> bool:
    """Whether a spoken answer holds one of the documents' titles or heading lines, as a sentence of its
    own ("Delivery times. Orders placed...") or run into the text ("Delivery times Orders placed...")."""
    return any(re.search(rf"(?<![\w-]){re.escape(h)}(\.|\s+[A-Z0-9])", spoken) for h in titles_and_headings())


def answer_ranks(agent, questions: list[tuple[str, str]], k: int = 3) -> list[int | None]:
    """For each question, the rank (1 = best) of the first of the agent's `k` best chunks that holds
    its answer, or None."""
    from knowledge.search import search

    ranks: list[int | None] = []
    for question, answer in questions:
        hits = search(agent, question, k=k)
        ranks.append(next((rank for rank, hit in enumerate(hits, start=1) if answer in hit.text), None))
    return ranks
