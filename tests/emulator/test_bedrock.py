"""Amazon Bedrock's route through the SDK's own Bedrock client: `/invoke` answers JSON,
`/invoke-with-response-stream` AWS event-stream frames (decoded by botocore), and a body the
Bedrock API would refuse is refused."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import anthropic

from forkagent_jupyter.emulator import Emulator

PROFILE = "us.anthropic.claude-sonnet-4-6-v1:0"


def _client(emulator: Emulator) -> anthropic.AnthropicBedrock:
    return anthropic.AnthropicBedrock(
        api_key="bedrock-key-0000", base_url=emulator.base_url, aws_region="us-east-1"
    )


def test_invoke_and_the_event_stream_give_the_same_message(emulator: Emulator) -> None:
    client = _client(emulator)
    ask = {"model": PROFILE, "max_tokens": 64, "messages": [{"role": "user", "content": "Hi"}]}
    whole = client.messages.create(**ask)  # type: ignore[arg-type]
    with client.messages.stream(**ask) as stream:  # type: ignore[arg-type]
        texts = "".join(stream.text_stream)
        streamed = stream.get_final_message()
    [block] = whole.content
    assert block.type == "text" and [(b.type, b.text) for b in streamed.content] == [
        ("text", block.text)
    ]
    assert streamed.stop_reason == whole.stop_reason
    assert texts == block.text  # the deltas, frame by frame
    assert streamed.usage.output_tokens == whole.usage.output_tokens > 0
    [plain] = emulator.api_requests(f"/model/{PROFILE}/invoke")
    [framed] = emulator.api_requests(f"/model/{PROFILE}/invoke-with-response-stream")
    assert plain.body["model"] == framed.body["model"] == "claude-sonnet-4-6"
    assert plain.body["stream"] is False and framed.body["stream"] is True
    assert emulator.violations == []


def test_a_body_bedrock_refuses_is_refused(lenient_emulator: Emulator) -> None:
    def post(body: dict[str, object]) -> tuple[int, str]:
        request = urllib.request.Request(
            f"{lenient_emulator.base_url}/model/{PROFILE}/invoke",
            data=json.dumps(body).encode(),
            headers={"Authorization": "Bearer k", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request) as response:
                return response.status, response.read().decode()
        except urllib.error.HTTPError as exc:
            return exc.code, exc.read().decode()

    ask = {"max_tokens": 8, "messages": [{"role": "user", "content": "Hi"}]}
    status, text = post(ask)
    assert status == 400 and "anthropic_version: Field required" in text
    status, text = post({**ask, "anthropic_version": "bedrock-2023-05-31", "stream": True})
    assert status == 400 and "stream: Extra inputs are not permitted" in text
    status, text = post({**ask, "anthropic_version": "bedrock-2023-05-31", "model": "x"})
    assert status == 400 and "model: Extra inputs are not permitted" in text
    status, _ = post({**ask, "anthropic_version": "bedrock-2023-05-31"})
    assert status == 200
