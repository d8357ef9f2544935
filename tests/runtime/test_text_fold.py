"""The one fold of a turn's text (`fold_text`, `StreamedText`) that every view uses."""

from __future__ import annotations

from forkagent_jupyter.runtime.events import (
    RequestSent,
    Retrying,
    StreamedText,
    TextDelta,
    fold_text,
)


def test_a_retry_takes_back_only_what_the_broken_attempt_streamed() -> None:
    text = fold_text(fold_text("kept. ", TextDelta("broken")), RequestSent(1, "m", 2))
    assert text == "kept. broken"
    assert fold_text(text, Retrying(1, 3, 0.5, "stream dropped", discarded=6)) == "kept. "
    assert fold_text("abc", Retrying(1, 3, 0.5, "stream dropped", discarded=10)) == ""
    assert fold_text("abc", Retrying(1, 3, 0.5, "stream dropped")) == "abc"


def test_streamed_text_folds_as_fold_text_does_with_pieces_between() -> None:
    events = [TextDelta("Hello "), TextDelta("wor"), Retrying(1, 3, 0.1, "x", discarded=3)]
    events += [TextDelta("world"), TextDelta("!")]
    shown = StreamedText()
    expected = ""
    for event in events:
        shown.apply(event)
        expected = fold_text(expected, event)
    assert shown.text == expected == "Hello world!"
    shown.add(" [tool]")
    shown.apply(Retrying(2, 3, 0.1, "x", discarded=7))
    assert shown.text == "Hello world!"
