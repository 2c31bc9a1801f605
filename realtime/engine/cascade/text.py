"""The text pipeline: the cascade without speech, for typed sessions (docs/guides/typed-sessions.md).

A session opened with `modality="text"` runs this pipeline whatever VOICE_ENGINE says: caller turns
arrive as text (`Session.caller_text`), the brain answers through the cascade's own answering stage
(tools, transfer and end_call through the shell, the same rounds and rules), and each sentence the brain
has produced is handed to the shell at once, without synthesis; the shell commits the whole answer as
an assistant transcript as soon as the brain has finished it. No voice activity detection, no speech
recognition, no speech synthesis and no playout: nothing here loads a speech model.
"""

from __future__ import annotations

from collections.abc import Sequence

from realtime.engine.brain import brain_for, brain_problems
from realtime.engine.cascade.pipeline import CascadePipeline
from realtime.engine.contracts import Brain, Conversation, Response
from realtime.engine.speech.espeak import split_sentences


class TextPipeline(CascadePipeline):
    name = "text"
    required_settings: tuple[str, ...] = ()

    def __init__(self, *, brain: Brain | None = None) -> None:
        super().__init__(brain=brain)

    @classmethod
    def configuration_problems(cls) -> list[str]:
        """Why typed sessions cannot run as configured (their brain), empty when fine."""
        return brain_problems()

    @classmethod
    def preload(cls) -> None:
        """Nothing to load: no speech model."""

    async def prepare(self, session: Conversation) -> None:
        self.session = session
        self.brain = self.brain or brain_for(session.agent)

    async def handed_off(self) -> None:
        """The call was handed to another agent: its brain takes over (nothing to hear with)."""
        assert self.session is not None
        self.brain = brain_for(self.session.agent)

    def begin(self) -> None:
        """No stage of its own: answers run as the shell's tracked tasks (`text_turn`)."""

    def push_audio(self, pcm16_16k: bytes) -> None:
        """A typed session takes no audio."""

    def split_sentences(self, text: str) -> list[str]:
        return split_sentences(text)

    def say(self, response: Response, text: str, *, offline: bool = False) -> None:
        """A sentence of the answer: to the shell at once (no synthesis)."""
        assert self.session is not None
        text = text.strip()
        if text and not response.cancelled:
            self.session.play(response, text, b"", response.add_sentence(text))

    def end(self, response: Response) -> None:
        """The answer is complete: the shell commits it now."""
        assert self.session is not None
        self.session.finish_response(response)


__all__: Sequence[str] = ("TextPipeline",)
