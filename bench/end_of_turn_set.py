"""The labelled utterance endings of bench/end_of_turn.py: what callers say to a voice agent, by kind.

Each line is one sentence; every `|` in it is a place where a caller may pause mid-sentence. Each sentence
gives one COMPLETE ending (the whole sentence, then silence) and one INCOMPLETE ending per `|` (the
sentence's audio cut at that word boundary, then silence: the caller pauses and would go on). The audio
is made at bench time (eSpeak NG and Piper voices), cut from the whole sentence's audio so that the
voice's melody at the cut is the one of a sentence that goes on. (No `|` between two words that eSpeak
says as one, such as "of the", "for the", "on the": its audio has no boundary there.)
"""

from __future__ import annotations

COMPLETE, INCOMPLETE = "complete", "incomplete"

# (kind, sentence with | at its pauses)
SENTENCES: tuple[tuple[str, str], ...] = (
    # requests and statements
    ("request", "I would like to | book a table for | four people tonight."),
    ("request", "Can you | tell me the opening hours | of the store on Sunday?"),
    ("request", "Please transfer me to | a human."),
    ("request", "I want to | cancel my order."),
    ("request", "I need to | change the delivery address for | my parcel."),
    ("request", "Could you send the confirmation to | my email address?"),
    ("request", "I'd like to | speak with the manager please."),
    ("request", "Can I | get a refund | for the shoes I bought last week?"),
    ("request", "Book me an appointment with | doctor Smith on | Tuesday morning."),
    ("request", "I want to | pay my bill."),
    ("request", "Please | cancel the subscription."),
    ("request", "Where is | my parcel?"),
    ("request", "Can you check if | the blue jacket is | still in stock?"),
    ("request", "I was charged twice | for the same appointment last week."),
    ("request", "We will arrive | a little late, around | eight thirty."),
    ("request", "My flight was cancelled and | I need a new one."),
    ("request", "I would like to | reschedule my appointment to | next Friday."),
    ("request", "Tell me | the price of the large pizza."),
    ("request", "I am calling about | the invoice you sent me."),
    ("request", "The heating in | my apartment is | not working."),
    ("request", "Do you deliver to | the north side of town?"),
    ("request", "I have a question about | my account."),
    ("request", "Is the pharmacy | open on public holidays?"),
    ("request", "I'd like | two tickets | for the evening show."),
    ("request", "My internet has been down since | yesterday afternoon."),
    ("request", "Can you | read me the last | three transactions?"),
    ("request", "I lost my card and | I need to block it."),
    ("request", "What time does | the last train leave?"),
    ("request", "I want to | add my wife to | the reservation."),
    ("request", "How much does | it cost to ship a package to | Canada?"),
    ("request", "Can you | remind me | what time my appointment is?"),
    ("request", "I'd like to | order a large pepperoni pizza | to go."),
    ("request", "Is there | parking near | your office?"),
    ("request", "I want to | report a problem | with my bill."),
    ("request", "Could you | spell that | please?"),
    # numbers read digit by digit
    ("number", "My number is | five five five | two one three | four four nine one."),
    ("number", "The order number is | seven three | eight two | six."),
    ("number", "My zip code is | nine four one | oh seven."),
    ("number", "The code on the card is | four | two | nine."),
    ("number", "My account number is | one two three four | five six seven eight."),
    ("number", "Call me back on | oh seven seven | nine double one | four eight two."),
    ("number", "The booking reference is | A B | seven | nine."),
    ("number", "It is flat | twelve | B."),
    ("number", "My date of birth is | the third of | March nineteen eighty."),
    ("number", "I need a table for | six."),
    ("number", "The amount was | forty two | dollars and | fifty cents."),
    ("number", "My PIN is | one | one | two | three."),
    # lists
    ("list", "I would like a pizza, | a salad, | and two cokes."),
    ("list", "I need milk, | bread, | eggs and butter."),
    ("list", "We are free on | Monday, | Wednesday | and Friday."),
    ("list", "Please send it to | me, | my wife, | and my son."),
    ("list", "The room needs towels, | soap | and a new lamp."),
    ("list", "I want the red one, | the green one | and the yellow one."),
    ("list", "I speak English, | Spanish | and a little Italian."),
    ("list", "I need a room with | two beds, | a view | and breakfast."),
    # hesitations
    ("hesitation", "I want to um | cancel my order."),
    ("hesitation", "So | I was wondering if | you could help me."),
    ("hesitation", "Well | I think | that's all."),
    ("hesitation", "It's um | it's about | my bill."),
    ("hesitation", "Can you uh | check my | balance?"),
    ("hesitation", "I would like | hmm | the chicken please."),
    ("hesitation", "My name is | uh | John Miller."),
    ("hesitation", "The thing is | I never got | the package."),
    ("hesitation", "Let me see, | it was | on the fifth."),
    ("hesitation", "I mean | I'd rather | come tomorrow."),
    ("hesitation", "Um | I'm not sure | what I need."),
    ("hesitation", "Actually | you know what, | never mind."),
    # short answers and closings
    ("short", "Yes."),
    ("short", "No thanks."),
    ("short", "That's right."),
    ("short", "Okay, | thank you."),
    ("short", "Goodbye."),
    ("short", "Sounds good."),
    ("short", "Thank you very much, | that is all I needed | today."),
    ("short", "Yes, | that's correct."),
    ("short", "No, | that's not what I said."),
    ("short", "Perfect, | see you then."),
    ("short", "Not really."),
    ("short", "I don't know."),
    ("short", "Maybe later."),
    ("short", "Hello?"),
    ("short", "All right, | that works."),
    ("short", "Yes please."),
)


def endings() -> list[tuple[str, str, str, int | None]]:
    """(kind, label, sentence without marks, words kept: None for the whole sentence) of every ending."""
    out: list[tuple[str, str, str, int | None]] = []
    for kind, marked in SENTENCES:
        parts = [part.strip() for part in marked.split("|")]
        sentence = " ".join(parts)
        out.append((kind, COMPLETE, sentence, None))
        kept = 0
        for part in parts[:-1]:
            kept += len(part.split())
            out.append((kind, INCOMPLETE, sentence, kept))
    return out
