"""What the offline neural speech providers cost on this machine (docs/guides/neural-speech.md):

- Whisper (ASR_PROVIDER=whisper, int8): word error rate (numbers in digits count as their words), wall time and CPU seconds per caller turn on
  eSpeak NG sentences (the five agent voice profiles in turn), at 16 kHz (browser) and through the phone
  path (24 kHz -> 8 kHz mu-law -> 16 kHz, telephony/audio.py), with beam size 1 and 5 and 1 or 2 threads;
- Piper (TTS_PROVIDER=piper): real-time factor and time to first audio per sentence (the cascade
  synthesizes one sentence at a time, so its first audio is the whole sentence's synthesis time);
- hence CPU seconds per minute of conversation and the calls one core sustains, for a stated call shape.

Both through the providers' real entry points (WhisperRecognition().recognizer(...).finish(),
PiperSpeech().synthesize). The models default to the packaged ones of requirements-dev.txt; other
models: --whisper-model-path DIR and --piper-model-path FILE.onnx.

    .venv/bin/python bench/neural_speech.py [--sentences 10]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

SENTENCES = [
    "I would like to book a table for four people tomorrow evening.",
    "Can you tell me what time you open on Sunday?",
    "My phone number is five five five, one two three four.",
    "I need to cancel my reservation for Friday night.",
    "Do you have any vegetarian options on the menu?",
    "Please transfer me to the billing department.",
    "The order number is seven eight nine zero.",
    "Is there parking available near the restaurant?",
    "I was charged twice for the same appointment last week.",
    "Could you send the confirmation to my email address?",
    "We will arrive a little late, around eight thirty.",
    "Thank you very much, that is all I needed today.",
]
VOICES = ("eve", "ara", "rex", "sal", "leo")
# The call shape behind "calls per core": the caller's turns and the agent's speech in one minute.
CALLER_TURNS_PER_MINUTE = 6  # a caller turn every 10 s
AGENT_SPEECH_SECONDS_PER_MINUTE = 30  # the agent talks half the time


def spoken(text: str) -> str:
    """The text's words with numbers as words ("4" -> "four", "1,2" -> "one two"): Whisper writes
    numbers in digits, the sentences spell them, and neither is an error."""
    from num2words import num2words

    from testing.speech_models import words

    out = []
    for word in words(text.replace(",", " ").replace("-", " ")):
        out.append(num2words(int(word)) if word.isdigit() else word)
    return " ".join(out)


def phone_path(pcm16_24k: bytes) -> bytes:
    """The caller as a phone call brings them: 8 kHz mu-law, back to 16 kHz for the engine."""
    from telephony import audio

    ulaw = audio.ulaw_encode(audio.Downsampler().process(pcm16_24k))
    return audio.phone_to_engine(ulaw, audio.Upsampler())


def measure_whisper(settings, cases, *, beam: int, threads: int, verbose: bool) -> dict[str, float]:
    from realtime.engine.speech import whisper
    from testing.speech_models import word_errors, words

    settings.WHISPER_BEAM_SIZE, settings.WHISPER_CPU_THREADS = beam, threads
    provider = whisper.WhisperRecognition()
    recognizer = provider.recognizer(SimpleNamespace(name="Ava", language="en-US"), [])
    recognizer.feed(cases[0][1])
    recognizer.finish()  # warm-up (the model loads on the first use of these settings)
    walls, cpus, errors, total, seconds = [], [], 0, 0, []
    for sentence, pcm in cases:
        recognizer.start()
        recognizer.feed(pcm)
        wall, cpu = time.perf_counter(), time.process_time()
        heard = recognizer.finish()
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        seconds.append(len(pcm) / 32000)
        wrong = word_errors(spoken(sentence), spoken(heard))
        errors += wrong
        total += len(words(spoken(sentence)))
        if wrong and verbose:
            print(f"      heard {heard!r} for {sentence!r}")
    return {
        "wer": errors / total,
        "wall": statistics.median(walls),
        "wall_max": max(walls),
        "cpu": statistics.mean(cpus),
        "audio": statistics.mean(seconds),
    }


def measure_piper(sentences: list[str]) -> dict[str, float]:
    from realtime.engine.audio import OUT_RATE
    from realtime.engine.speech.piper import PiperSpeech

    voice = PiperSpeech()
    voice.synthesize("Warming up.", "en-US", "eve")
    walls, cpus, audio = [], [], []
    for sentence in sentences:
        wall, cpu = time.perf_counter(), time.process_time()
        pcm = voice.synthesize(sentence, "en-US", "eve")
        walls.append(time.perf_counter() - wall)
        cpus.append(time.process_time() - cpu)
        audio.append(len(pcm) / 2 / OUT_RATE)
    return {
        "first_audio": statistics.median(walls),
        "first_audio_max": max(walls),
        "rtf": sum(walls) / sum(audio),
        "cpu_rtf": sum(cpus) / sum(audio),
        "audio": statistics.mean(audio),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sentences", type=int, default=10, help="eSpeak NG sentences per configuration")
    parser.add_argument("--whisper-model-path", default="", help="a CTranslate2 Whisper directory (default: packaged)")
    parser.add_argument("--piper-model-path", default="", help="a Piper .onnx voice (default: packaged)")
    parser.add_argument("--quick", action="store_true", help="beam 1 at 16 kHz only")
    parser.add_argument("--verbose", action="store_true", help="print every misheard sentence")
    args = parser.parse_args()

    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "voiceagent.settings")
    import django

    django.setup()
    from django.conf import settings

    from realtime.engine.speech.espeak import synthesize
    from testing.speech_models import packaged_piper_joe, packaged_whisper_base
    from testing.voice import to_16k

    with tempfile.TemporaryDirectory() as scratch:
        settings.WHISPER_MODEL_PATH = args.whisper_model_path or str(packaged_whisper_base(Path(scratch) / "whisper"))
        settings.PIPER_MODEL_PATH = args.piper_model_path or str(packaged_piper_joe())
        settings.WHISPER_MODEL_SHA256 = settings.PIPER_MODEL_SHA256 = ""
        settings.WHISPER_PROMPT_CHARS = 0
        sentences = [SENTENCES[index % len(SENTENCES)] for index in range(args.sentences)]
        speech = [
            synthesize(sentence, language="en-US", voice_name=VOICES[index % len(VOICES)])
            for index, sentence in enumerate(sentences)
        ]
        browser = list(zip(sentences, [to_16k(pcm) for pcm in speech], strict=True))
        phone = list(zip(sentences, [phone_path(pcm) for pcm in speech], strict=True))
        print(f"machine: {os.cpu_count()} cores; whisper model {settings.WHISPER_MODEL_PATH}")
        print(f"{len(sentences)} eSpeak NG sentences, {statistics.mean(len(p) / 32000 for _, p in browser):.1f} s each")
        configurations = [("16 kHz", browser, 1, 2)]
        if not args.quick:
            configurations += [("16 kHz", browser, 5, 2), ("16 kHz", browser, 1, 1), ("phone 8 kHz", phone, 1, 2)]
            configurations += [("phone 8 kHz", phone, 5, 2)]
        print("\nWhisper (int8)        beam threads   WER   wall p50  wall max  CPU s/turn")
        rows = {}
        for label, cases, beam, threads in configurations:
            row = measure_whisper(settings, cases, beam=beam, threads=threads, verbose=args.verbose)
            rows[(label, beam, threads)] = row
            print(
                f"  {label:<18} {beam:>5} {threads:>7} {row['wer']:>6.1%} {row['wall']:>8.2f}s "
                f"{row['wall_max']:>8.2f}s {row['cpu']:>10.2f}"
            )
        piper = measure_piper(sentences)
        print(f"\nPiper ({Path(settings.PIPER_MODEL_PATH).name}), one sentence at a time, {piper['audio']:.1f} s each:")
        print(
            f"  time to first audio p50 {piper['first_audio']:.2f} s (max {piper['first_audio_max']:.2f} s); "
            f"real-time factor {piper['rtf']:.3f} wall, {piper['cpu_rtf']:.3f} CPU"
        )
        whisper_cpu = rows[("16 kHz", 1, 2)]["cpu"]
        per_minute = CALLER_TURNS_PER_MINUTE * whisper_cpu + AGENT_SPEECH_SECONDS_PER_MINUTE * piper["cpu_rtf"]
        print(
            f"\nOne minute of conversation ({CALLER_TURNS_PER_MINUTE} caller turns, {AGENT_SPEECH_SECONDS_PER_MINUTE} s "
            f"of agent speech): {CALLER_TURNS_PER_MINUTE} x {whisper_cpu:.2f} + {AGENT_SPEECH_SECONDS_PER_MINUTE} x "
            f"{piper['cpu_rtf']:.3f} = {per_minute:.1f} CPU s, so about {60 / per_minute:.1f} concurrent calls per "
            "core for the neural speech alone (the VAD, the offline voice and the brain come on top)"
        )


if __name__ == "__main__":
    main()
