"""The ledger's rules (calls/costs/ledger.py, pricing.py): which price a quantity takes, units that measure
the same thing, the cached-token fallback, and a speech-to-speech provider's tokens split by kind."""

from __future__ import annotations

from decimal import Decimal

from calls.costs.ledger import ledger_lines, ledger_total, quantity, token_quantities
from calls.costs.pricing import book_parse

BOOK = book_parse(
    {
        "currency": "USD",
        "items": [
            {"product": "telephony", "provider": "*", "unit": "second", "unitPrice": 0.001},
            {"product": "telephony", "provider": "twilio", "unit": "minute", "unitPrice": 0.012},
            {"product": "telephony", "provider": "twilio", "model": "outbound", "unit": "minute", "unitPrice": 0.03},
            {"product": "llm", "provider": "openai", "unit": "input_token", "unitPrice": 0.00001},
            {"product": "speech_to_speech", "provider": "openai", "unit": "audio_output_token", "unitPrice": 0.0001},
        ],
    }
)


def priced(*quantities):
    return [
        (line["provider"], line["model"], line["unit"], line["quantity"], line["amount"])
        for line in ledger_lines(BOOK, quantities)
    ]


def test_the_most_specific_price_applies_and_seconds_become_minutes():
    assert priced(
        quantity("telephony", "twilio", "outbound", "second", 90),
        quantity("telephony", "twilio", "inbound", "second", 90),
        quantity("telephony", "telnyx", "inbound", "second", 90),
    ) == [
        ("telnyx", "inbound", "second", 90.0, 0.09),  # any provider, per second
        ("twilio", "inbound", "minute", 1.5, 0.018),  # the provider's price for any model
        ("twilio", "outbound", "minute", 1.5, 0.045),  # the model's own
    ]


def test_quantities_of_one_kind_are_summed_and_an_unpriced_one_costs_nothing():
    lines = ledger_lines(
        BOOK,
        [quantity("tts", "openai", "tts-1", "character", 40), quantity("tts", "openai", "tts-1", "character", 2)],
    )
    assert lines == [
        {
            "product": "tts",
            "provider": "openai",
            "model": "tts-1",
            "quantity": 42.0,
            "unit": "character",
            "unitPrice": 0.0,
            "amount": 0.0,
        }
    ]
    assert ledger_total(lines) == Decimal(0)


def test_cached_input_tokens_without_a_price_of_their_own_cost_an_input_tokens():
    tokens = token_quantities(
        "llm", "openai", "gpt-4o-mini", input_tokens=1000, output_tokens=50, cached_input_tokens=600
    )
    assert priced(*tokens) == [
        ("openai", "gpt-4o-mini", "input_token", 400.0, 0.004),
        ("openai", "gpt-4o-mini", "cached_input_token", 600.0, 0.006),
        ("openai", "gpt-4o-mini", "output_token", 50.0, 0.0),
    ]


def test_a_speech_to_speech_providers_tokens_are_split_into_text_and_audio():
    tokens = token_quantities(
        "speech_to_speech",
        "openai",
        "gpt-realtime",
        input_tokens=900,
        output_tokens=300,
        cached_input_tokens=100,
        input_audio_tokens=700,
        output_audio_tokens=250,
    )
    assert [(t.unit, t.quantity) for t in tokens] == [
        ("input_token", 100),  # 900 - 700 audio - 100 cached
        ("cached_input_token", 100),
        ("output_token", 50),
        ("audio_input_token", 700),
        ("audio_output_token", 250),
    ]
    assert ledger_total(ledger_lines(BOOK, tokens)) == Decimal("0.025")
