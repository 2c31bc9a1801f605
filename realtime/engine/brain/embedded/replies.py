"""What the embedded brain says: one phrase table (English, Spanish, Italian; other languages speak
English), tool results spoken briefly, knowledge passages, questions for missing arguments and the
agent's description of itself from its configuration.

Words that come from the agent's configuration (tool descriptions, parameter names) are English and
stay as written inside the phrases of every language.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from typing import Any

from realtime.engine.brain.embedded.arguments import Parameter
from realtime.engine.brain.embedded.understanding import NATIVE_TOOLS, split_identifier
from realtime.engine.contracts import BrainContext, ToolSpec

RESULT_WORDS = 30  # a tool result is spoken in about this many words at most
ANSWER_WORDS = 35  # a knowledge answer (the best sentences of the best passage) likewise
PHRASE_WORDS = 8  # a tool's description becomes a phrase of at most this many words
LISTED_TOOLS = 4  # the self-description names at most this many tools
SPOKEN_FIELDS = ("message", "text", "result", "answer", "summary", "response")

PHRASES: dict[str, dict[str, str]] = {
    "en": {
        "not_caught": "Sorry, I did not catch that. Could you say it again?",
        "greeting": "Hello! How can I help you today?",
        "thanks": "You're welcome. Is there anything else I can help with?",
        "goodbye": "Thank you for calling. Goodbye!",
        "yes": "Sure, how can I help?",
        "no_transfer": "I'm sorry, I can't transfer you to a person on this line, but I'm happy to help you myself. What do you need?",
        "transfer_failed": "Sorry, I could not transfer you right now. Can I help you with something else?",
        "tool_error": "Sorry, I could not complete that right now.",
        "done": "Done.",
        "dont_know": "Sorry, I don't know that.",
        "can_help": "I can help you {items}.",
        "can_help_with": "I can help with {items}.",
        "also_with": "I can also help with {items}.",
        "answer_questions": "find answers to your questions",
        "help_topics": "I can help with questions about {items}.",
        "what_next": "What would you like to do?",
        "anything_else": "Is there anything else I can help with?",
        "how_help": "How can I help you?",
        "intro": "I'm {name}.",
        "which_tool": "Would you like to {options}?",
        "ask_value": "What is the {label}?",
        "ask_plural": "What are the {label}?",
        "ask_your": "What is {label}?",
        "ask_date": "Which date would you like?",
        "ask_time": "What time would you like?",
        "ask_datetime": "Which date and time would you like?",
        "ask_email": "What is your email address?",
        "ask_phone": "What is the phone number?",
        "ask_bool": "{label}: yes or no?",
        "ask_choice": "Which {label} would you like: {options}?",
        "reask": "Sorry, I did not get that.",
        "cancelled": "All right, I have cancelled that. Is there anything else I can help with?",
        "and": "and",
        "or": "or",
    },
    "es": {
        "not_caught": "Perdone, no le he entendido. ¿Puede repetirlo?",
        "greeting": "¡Hola! ¿En qué puedo ayudarle?",
        "thanks": "De nada. ¿Puedo ayudarle en algo más?",
        "goodbye": "Gracias por llamar. ¡Adiós!",
        "yes": "Claro, ¿en qué puedo ayudarle?",
        "no_transfer": "Lo siento, no puedo pasarle con una persona en esta línea, pero puedo ayudarle yo. ¿Qué necesita?",
        "transfer_failed": "Lo siento, ahora no he podido pasarle la llamada. ¿Puedo ayudarle en otra cosa?",
        "tool_error": "Lo siento, ahora mismo no he podido hacerlo.",
        "done": "Hecho.",
        "dont_know": "Lo siento, no tengo esa información.",
        "can_help": "Puedo ayudarle a {items}.",
        "can_help_with": "Puedo ayudarle con {items}.",
        "also_with": "También puedo ayudarle con {items}.",
        "answer_questions": "encontrar respuestas a sus preguntas",
        "help_topics": "Puedo ayudarle con preguntas sobre {items}.",
        "what_next": "¿Qué le gustaría hacer?",
        "anything_else": "¿Puedo ayudarle en algo más?",
        "how_help": "¿En qué puedo ayudarle?",
        "intro": "Soy {name}.",
        "which_tool": "¿Quiere {options}?",
        "ask_value": "¿Me puede decir {label}?",
        "ask_plural": "¿Me puede decir {label}?",
        "ask_your": "¿Me puede decir {label}?",
        "ask_date": "¿Para qué fecha?",
        "ask_time": "¿A qué hora?",
        "ask_datetime": "¿Para qué fecha y hora?",
        "ask_email": "¿Cuál es su correo electrónico?",
        "ask_phone": "¿Cuál es el número de teléfono?",
        "ask_bool": "{label}: ¿sí o no?",
        "ask_choice": "¿Qué {label} prefiere: {options}?",
        "reask": "Perdone, no le he entendido.",
        "cancelled": "De acuerdo, lo he cancelado. ¿Puedo ayudarle en algo más?",
        "and": "y",
        "or": "o",
    },
    "it": {
        "not_caught": "Mi scusi, non ho capito. Può ripetere?",
        "greeting": "Buongiorno! Come posso aiutarla?",
        "thanks": "Prego. Posso aiutarla in qualcos'altro?",
        "goodbye": "Grazie per aver chiamato. Arrivederci!",
        "yes": "Certo, come posso aiutarla?",
        "no_transfer": "Mi dispiace, su questa linea non posso passarla a una persona, ma posso aiutarla io. Di cosa ha bisogno?",
        "transfer_failed": "Mi dispiace, non sono riuscito a trasferire la chiamata. Posso aiutarla in altro modo?",
        "tool_error": "Mi dispiace, al momento non sono riuscito a farlo.",
        "done": "Fatto.",
        "dont_know": "Mi dispiace, non ho questa informazione.",
        "can_help": "Posso aiutarla a {items}.",
        "can_help_with": "Posso aiutarla con {items}.",
        "also_with": "Posso aiutarla anche con {items}.",
        "answer_questions": "trovare risposte alle sue domande",
        "help_topics": "Posso aiutarla con domande su {items}.",
        "what_next": "Cosa desidera fare?",
        "anything_else": "Posso aiutarla in qualcos'altro?",
        "how_help": "Come posso aiutarla?",
        "intro": "Sono {name}.",
        "which_tool": "Vuole {options}?",
        "ask_value": "Mi può dire {label}?",
        "ask_plural": "Mi può dire {label}?",
        "ask_your": "Mi può dire {label}?",
        "ask_date": "Per quale data?",
        "ask_time": "A che ora?",
        "ask_datetime": "Per quale data e ora?",
        "ask_email": "Qual è il suo indirizzo email?",
        "ask_phone": "Qual è il numero di telefono?",
        "ask_bool": "{label}: sì o no?",
        "ask_choice": "Quale {label} preferisce: {options}?",
        "reask": "Mi scusi, non ho capito.",
        "cancelled": "D'accordo, ho annullato. Posso aiutarla in qualcos'altro?",
        "and": "e",
        "or": "o",
    },
}

VERBS = frozenset(
    """add answer apply ask assign book buy calculate cancel change check close compare compute confirm
    connect contact convert create delete estimate fetch file find forward generate get give help list
    locate log look lookup make modify notify open order pay place provide purchase quote read record
    refund register remove renew report request reschedule reserve reset retrieve return schedule search
    send set share show sign start stop submit subscribe tell track transfer translate unsubscribe update
    upgrade validate verify view""".split()
)
_LEAD_INS = re.compile(
    r"^(?:this (?:tool|function|action) (?:is used to |lets you |allows you to |will |can )?|use this (?:tool |function )?to "
    r"|used to |tool (?:to|that|for) |function (?:to|that) |allows (?:the )?(?:caller|user|customer|you) to "
    r"|lets (?:the )?(?:caller|user|customer|you) |call this to |helps (?:to )?)",
    re.IGNORECASE,
)
_PLAIN_VERBS = {"return": "get", "retrieve": "get", "fetch": "get", "obtain": "get", "lookup": "look up"}
_DETERMINERS = frozenset("a an the my your their our some any".split())
_PERSON = r"(?:the |a )?(?:caller|customer|user|guest|patient|client)"
# A description's phrase ends before these ("Book a table at the restaurant" -> "book a table").
_CONNECTORS = frozenset(
    "given using by with for based via when if that which at in from on to so because within".split()
)
_TRAILING = frozenset("a an the of for to and or by with in on at from your their its via using".split())


def phrase(key: str, language: str) -> str:
    table = PHRASES.get(language) or PHRASES.get(language.split("-")[0].lower()) or PHRASES["en"]
    return table.get(key) or PHRASES["en"][key]


def join(items: list[str], language: str, word: str = "and") -> str:
    if len(items) < 2:
        return "".join(items)
    return f"{', '.join(items[:-1])} {phrase(word, language)} {items[-1]}"


def first_upper(text: str) -> str:
    return text[:1].upper() + text[1:]


# Tool results -------------------------------------------------------------------------------------


def speak_result(result_text: str, language: str) -> str:
    """A tool result in a sentence or two: its message/text/result field, or its plain values."""
    try:
        result = json.loads(result_text) if result_text.strip() else {}
    except ValueError:
        return trim(plain_text(result_text), RESULT_WORDS) or phrase("done", language)
    if isinstance(result, dict) and result.get("error"):
        return phrase("tool_error", language)
    spoken = _spoken_value(result, language)
    return spoken or phrase("done", language)


def _spoken_value(result: Any, language: str, depth: int = 0) -> str:
    if isinstance(result, str):
        return first_upper(trim(plain_text(result), RESULT_WORDS))
    if isinstance(result, bool):
        return first_upper(_scalar(result)) + "."
    if isinstance(result, int | float):
        return f"{result}."
    if isinstance(result, list):
        listed = _listed(result, language)
        return trim(first_upper(listed) + ".", RESULT_WORDS) if listed else ""
    if not isinstance(result, dict) or depth > 1:
        return ""
    for key in SPOKEN_FIELDS:
        value = result.get(key)
        if isinstance(value, str) and value.strip():
            return first_upper(trim(plain_text(value), RESULT_WORDS))
        if isinstance(value, dict | list) and value:
            inner = _spoken_value(value, language, depth + 1)
            if inner:
                return inner
    pairs: list[str] = []
    words = 0
    for key, value in result.items():
        spoken = _listed(value, language) if isinstance(value, list) else _scalar(value) if _is_scalar(value) else ""
        if not spoken:
            continue
        pair = f"{' '.join(split_identifier(str(key)))}: {spoken}"
        size = len(pair.split())
        if pairs and words + size > RESULT_WORDS:
            break
        pairs.append(pair)
        words += size
    if not pairs:
        nested = next((value for value in result.values() if isinstance(value, dict) and value), None)
        return _spoken_value(nested, language, depth + 1) if nested else ""
    return trim(first_upper(", ".join(pairs)) + ".", RESULT_WORDS)


def _listed(items: list[Any], language: str) -> str:
    """A list as heard: its scalars, or the first plain value of each object ("10:00, 11:00 and 12:00")."""
    spoken = []
    for item in items[:5]:
        if _is_scalar(item):
            spoken.append(_scalar(item))
        elif isinstance(item, dict):
            first = next((value for value in item.values() if _is_scalar(value) and value != ""), None)
            if first is not None:
                spoken.append(_scalar(first))
    return join(spoken, language)


def _is_scalar(value: Any) -> bool:
    return isinstance(value, str | int | float | bool) and value is not None


def _scalar(value: Any) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    return plain_text(str(value)).rstrip(".")


# Knowledge passages -------------------------------------------------------------------------------


def plain_text(text: str) -> str:
    """Markdown as it should be heard: no #, *, |, link targets or code fences; a line that ends
    without punctuation (a heading, a table row) ends a sentence."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links and images keep their text
    text = re.sub(r"<https?://[^>]*>|https?://\S+", "", text)
    text = re.sub(r"<[^>]+>", " ", text)
    lines = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line or re.fullmatch(r"[|:\-\s=*_`~]+", line):
            continue  # rules, table separators, fences
        if line.startswith("|") or line.endswith("|"):
            cells = [cell.strip() for cell in line.strip("|").split("|") if cell.strip()]
            line = ", ".join(cells)
        line = re.sub(r"^(?:#{1,6}\s*|>\s*|[-*+]\s+|\d+[.)]\s+)+", "", line)
        line = re.sub(r"(\*\*|__|~~|`+)", "", line)
        line = re.sub(r"(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)", "", line)
        line = line.strip()
        if line and line[-1] not in ".!?:;,":
            line += "."
        if line:
            lines.append(line)
    return re.sub(r"\s+", " ", " ".join(lines)).strip()


def trim(text: str, limit: int) -> str:
    """At most `limit` words, cut at a sentence end when one is within reach."""
    words = text.split()
    if len(words) <= limit:
        return text
    sentences = re.split(r"(?<=[.!?])\s+", text)
    kept: list[str] = []
    count = 0
    for sentence in sentences:
        size = len(sentence.split())
        if count + size > limit:
            break
        kept.append(sentence)
        count += size
    if kept and count >= limit // 3:
        return " ".join(kept)
    cut = words[:limit]
    while len(cut) > 1 and cut[-1].lower().strip(",;:") in _TRAILING:
        cut.pop()
    return " ".join(cut).rstrip(",;:-") + "..."


# Questions ----------------------------------------------------------------------------------------


def question(parameter: Parameter, language: str) -> str:
    kind = parameter.kind
    if kind in ("date", "time", "datetime", "email", "phone"):
        return phrase(f"ask_{kind}", language)
    label = _label(parameter)
    if kind == "boolean":
        return phrase("ask_bool", language).format(label=first_upper(label))
    options = [_spoken_option(value) for value in parameter.options]
    if 1 < len(options) <= 4:
        label = label.removeprefix("your ")
        return phrase("ask_choice", language).format(label=label, options=join(options, language, "or"))
    last = label.split()[-1] if label.split() else ""
    plural = last.endswith("s") and not last.endswith(("ss", "us", "is")) and " of " not in label
    key = "ask_your" if label.startswith("your ") else "ask_plural" if plural else "ask_value"
    return phrase(key, language).format(label=label)


def _spoken_option(value: Any) -> str:
    text = str(value)
    return " ".join(split_identifier(text)) if text.isupper() or "_" in text or "-" in text else text


def _label(parameter: Parameter) -> str:
    """A property as named in a question: its short description ("number of guests"), or its name."""
    description = str(parameter.schema.get("description") or "")
    text = re.sub(r"\([^)]*\)", "", description).strip()
    text = re.split(
        r"[.;:,]\s|\s[-\u2013\u2014]\s|\s(?:e\.g\.|for example|such as|in format|in the format)\b", text + " "
    )[0]
    text = text.strip().rstrip(".")
    text = re.sub(rf"^{_PERSON}'s\b", "your", text, flags=re.IGNORECASE)
    text = re.sub(r"^(?:the|a|an)\s+", "", text, flags=re.IGNORECASE)
    words = text.split()
    starts_badly = bool(words) and words[0].lower() in ("whether", "if", "when", "specify", "enter", "provide", "use")
    if not words or len(words) > 6 or starts_badly or words[0].lower() in VERBS:
        return parameter.label.removeprefix("is ").removeprefix("has ")
    if not (words[0].isupper() and len(words[0]) > 1):
        words[0] = words[0].lower()
    return " ".join(words)


# Self-description ---------------------------------------------------------------------------------


def tool_phrase(tool: ToolSpec) -> tuple[str, bool]:
    """A tool's description as a short phrase and whether it starts with a verb: "Books a table at
    the restaurant." -> ("book a table", True)."""
    description = re.sub(r"\([^)]*\)", "", tool.description or "").strip()
    first = re.split(r"(?<=[.!?])\s", description)[0]
    first = re.split(r"[;:]\s|,\s|\s[-\u2013\u2014]\s", first)[0].strip().rstrip(".!")
    first = _LEAD_INS.sub("", first).strip()
    words = first.split() if first else split_identifier(tool.name)
    if not words:
        return "", False
    verb = _base_verb(words[0].lower())
    # A word before "a"/"the"/"your" opens a verb phrase too ("Leaves a message for the staff").
    is_verb = verb in VERBS or (len(words) > 1 and words[1].lower() in _DETERMINERS)
    if is_verb and verb not in VERBS:
        verb = re.sub(r"ies$", "y", verb) if verb.endswith("ies") else re.sub(r"(?<=[^s])s$", "", verb)
    if is_verb:
        words[0] = _PLAIN_VERBS.get(verb, verb)
    elif not (words[0].isupper() and len(words[0]) > 1):
        words[0] = words[0].lower()
    cut_at = next((i for i, word in enumerate(words) if i >= 2 and word.lower() in _CONNECTORS), len(words))
    text = " ".join(words[: min(cut_at, PHRASE_WORDS)])
    text = re.sub(rf"\b{_PERSON}'s\b", "your", text, flags=re.IGNORECASE)
    cut = text.split()
    while len(cut) > 1 and cut[-1].lower() in _TRAILING:
        cut.pop()
    return " ".join(cut), is_verb


def _base_verb(word: str) -> str:
    if word in VERBS:
        return word
    for ending, replacement in (("ies", "y"), ("ches", "ch"), ("shes", "sh"), ("sses", "ss"), ("xes", "x"), ("s", "")):
        if word.endswith(ending) and word[: -len(ending)] + replacement in VERBS:
            return word[: -len(ending)] + replacement
    return word


def capabilities(context: BrainContext, language: str, *, knowledge: bool = True) -> str:
    """What the agent can do, in a sentence or two: its tools' phrases (or its instructions)."""
    doing: list[str] = []
    topics: list[str] = []
    for tool in context.tools:
        if tool.name in NATIVE_TOOLS:
            continue
        text, is_verb = tool_phrase(tool)
        if text and text not in doing and text not in topics:
            (doing if is_verb else topics).append(text)
    if knowledge and context.tool("search_knowledge"):
        doing.append(phrase("answer_questions", language))
    doing, topics = doing[:LISTED_TOOLS], topics[: max(0, LISTED_TOOLS - len(doing))]
    sentences = []
    if doing:
        sentences.append(phrase("can_help", language).format(items=join(doing, language)))
    if topics:
        key = "also_with" if doing else "can_help_with"
        sentences.append(phrase(key, language).format(items=join(topics, language)))
    if not sentences:
        own = _instructions_sentence(context.instructions)
        if own:
            sentences.append(own)
    return " ".join(sentences)


def _instructions_sentence(text: str) -> str:
    """The first sentence of the instructions in the agent's voice, when it says what the agent does
    ("Help callers book tables." -> "I can help callers book tables."); otherwise nothing."""
    first = _first_sentence(text)
    if not first:
        return ""
    you = _as_me(first)
    if you:
        return you
    words = first.split()
    verb = words[0].lower()
    if verb in VERBS or verb in ("assist", "answer", "take", "handle", "help"):
        return f"I can {verb} {' '.join(words[1:])}".strip() + "."
    return ""


def _first_sentence(text: str, limit: int = 20) -> str:
    first = re.split(r"(?<=[.!?])\s|\n", (text or "").strip())[0].strip().rstrip(".!")
    words = first.split()
    if len(words) > limit:
        first = re.split(r",\s|;\s|\s[-\u2013\u2014]\s", first)[0]
        words = first.split()[:limit]
        first = " ".join(words)
    return first


def _as_me(sentence: str) -> str:
    match = re.match(r"^(?:you are|you're)\s+(.*)$", sentence, flags=re.IGNORECASE)
    if match:
        return f"I'm {match.group(1)}."
    match = re.match(r"^you\s+(\w+)\s+(.*)$", sentence, flags=re.IGNORECASE)
    if match and _base_verb(match.group(1).lower()) in VERBS | {"help", "assist", "answer", "take", "handle"}:
        return f"I {match.group(1).lower()} {match.group(2)}."
    return ""


def describe(
    context: BrainContext, language: str, *, introduce: bool = False, knowledge: bool = True, topics: Sequence[str] = ()
) -> str:
    """What the agent can do, from its tools (or its instructions) and the `topics` of its documents
    seen so far, then an open question; with `introduce`, who it is first; without `knowledge`, its
    documents go unmentioned (after a search that found nothing)."""
    parts = []
    can_do = capabilities(context, language, knowledge=knowledge)
    if topics:
        can_do = " ".join(
            part
            for part in (phrase("help_topics", language).format(items=join(list(topics), language)), can_do)
            if part
        )
    if introduce or not can_do:
        identity = _as_me(_first_sentence(context.identity)) if context.identity else ""
        parts.append(identity or phrase("intro", language).format(name=context.agent_name))
    if can_do:
        parts.append(can_do)
    parts.append(phrase("what_next" if can_do else "how_help", language))
    return " ".join(part for part in parts if part)


def which_tool(tools: tuple[ToolSpec, ...], language: str) -> str:
    options = []
    for tool in tools:
        text, is_verb = tool_phrase(tool)
        if not is_verb:
            words = split_identifier(tool.name)
            text = " ".join(words) if words and _base_verb(words[0]) in VERBS else f"ask about {text}"
        options.append(text)
    return phrase("which_tool", language).format(options=join(options, language, "or"))
