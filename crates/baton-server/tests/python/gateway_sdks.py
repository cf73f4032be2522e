"""The official `openai` and `anthropic` SDKs against baton's gateway.

Run by `crates/baton-server/tests/it/sdk.rs`, which starts the gateway in front of a scripted
upstream and checks how often the upstream was called:

    python gateway_sdks.py {openai|anthropic|openai-responses|errors} GATEWAY_URL BATON_KEY

For the vendor named, it completes a tool-calling exchange (the assistant calls a tool, the
tool's result goes back, the assistant answers) twice: without streaming, then streaming.
Every request is sent twice, and the second must be a cache hit with the same answer
(`x-baton-cache`, read through the SDK's raw-response API). Then 50 identical concurrent
requests. It prints one JSON object (what each request's `x-baton-cache` was) and exits 0, or
fails with a traceback.

`openai-responses` does the tool-calling exchange through `client.responses.create`, whole
and streamed. `errors` makes each SDK meet an error baton raises itself (the upstream does not
answer in time) and checks that the SDK's exception carries baton's explanation.
"""
import json
import sys
from concurrent.futures import ThreadPoolExecutor

PROVIDER_KEY = "sk-provider-from-the-sdk-0123456789"
WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}},
    "required": ["city"],
}


def openai_exchange(base, key):
    import openai

    client = openai.OpenAI(
        base_url=base + "/v1",
        api_key=PROVIDER_KEY,
        default_headers={"x-baton-key": key},
        max_retries=0,
    )
    tools = [{"type": "function", "function": {
        "name": "get_weather", "description": "The weather in a city",
        "parameters": WEATHER_SCHEMA}}]
    model = "gpt-4o-mini"
    seen = {}

    def create(tag, **kwargs):
        raw = client.chat.completions.with_raw_response.create(model=model, **kwargs)
        seen.setdefault(tag, []).append(raw.headers.get("x-baton-cache"))
        return raw.parse()

    def twice(tag, **kwargs):
        # The first reply is read to its end before the second request is sent: a stream
        # still being read is a call in flight, which the second would join (coalesced).
        read = collect_openai if kwargs.get("stream") else plain_openai
        first = read(create(tag, **kwargs))
        second = read(create(tag, **kwargs))
        assert first == second, (first, second)
        assert seen[tag] == ["miss", "hit"], (tag, seen[tag])
        return first

    for stream, city in [(False, "Paris"), (True, "Rome")]:
        tag = "stream" if stream else "json"
        messages = [{"role": "user", "content": f"What is the weather in {city}?"}]
        reply = twice(tag + " call", messages=messages, tools=tools, stream=stream)
        assert reply["finish_reason"] == "tool_calls", reply
        (call,) = reply["tool_calls"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": city}
        messages += [
            {"role": "assistant", "content": None, "tool_calls": [{
                "id": call["id"], "type": "function",
                "function": {"name": call["name"], "arguments": call["arguments"]}}]},
            {"role": "tool", "tool_call_id": call["id"], "content": f"{city}: 18 degrees, sunny"},
        ]
        final = twice(tag + " answer", messages=messages, tools=tools, stream=stream)
        assert final["finish_reason"] == "stop", final
        assert "18" in final["text"], final

    burst = [{"role": "user", "content": "burst: the same question fifty times"}]
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(
            lambda _: client.chat.completions.with_raw_response.create(model=model, messages=burst),
            range(50)))
    seen["burst"] = [a.headers.get("x-baton-cache") for a in answers]
    texts = {a.parse().choices[0].message.content for a in answers}
    assert len(texts) == 1, texts
    return seen


def plain_openai(completion):
    choice = completion.choices[0]
    calls = [{"id": c.id, "name": c.function.name, "arguments": c.function.arguments}
             for c in (choice.message.tool_calls or [])]
    return {"id": completion.id, "text": choice.message.content or "",
            "tool_calls": calls, "finish_reason": choice.finish_reason}


def collect_openai(stream):
    out = {"id": None, "text": "", "tool_calls": [], "finish_reason": None}
    calls = {}
    for chunk in stream:
        out["id"] = chunk.id
        for choice in chunk.choices:
            delta = choice.delta
            out["text"] += delta.content or ""
            for piece in delta.tool_calls or []:
                call = calls.setdefault(piece.index, {"id": None, "name": "", "arguments": ""})
                call["id"] = piece.id or call["id"]
                if piece.function:
                    call["name"] += piece.function.name or ""
                    call["arguments"] += piece.function.arguments or ""
            out["finish_reason"] = choice.finish_reason or out["finish_reason"]
    out["tool_calls"] = [calls[i] for i in sorted(calls)]
    return out


def anthropic_exchange(base, key):
    import anthropic

    client = anthropic.Anthropic(
        base_url=base,
        api_key=PROVIDER_KEY,
        default_headers={"x-baton-key": key},
        max_retries=0,
    )
    tools = [{"name": "get_weather", "description": "The weather in a city",
              "input_schema": WEATHER_SCHEMA}]
    model = "claude-sonnet-4-5"
    seen = {}

    def create(tag, **kwargs):
        raw = client.messages.with_raw_response.create(model=model, max_tokens=512, **kwargs)
        seen.setdefault(tag, []).append(raw.headers.get("x-baton-cache"))
        return raw.parse()

    def twice(tag, **kwargs):
        # The first reply is read to its end before the second request is sent: a stream
        # still being read is a call in flight, which the second would join (coalesced).
        read = collect_anthropic if kwargs.get("stream") else plain_anthropic
        first = read(create(tag, **kwargs))
        second = read(create(tag, **kwargs))
        assert first == second, (first, second)
        assert seen[tag] == ["miss", "hit"], (tag, seen[tag])
        return first

    for stream, city in [(False, "Paris"), (True, "Rome")]:
        tag = "stream" if stream else "json"
        messages = [{"role": "user", "content": f"What is the weather in {city}?"}]
        reply = twice(tag + " call", messages=messages, tools=tools, stream=stream)
        assert reply["stop_reason"] == "tool_use", reply
        calls = [b for b in reply["content"] if b["type"] == "tool_use"]
        assert len(calls) == 1 and calls[0]["input"] == {"city": city}, reply
        messages += [
            {"role": "assistant", "content": reply["content"]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": calls[0]["id"],
                                          "content": f"{city}: 18 degrees, sunny"}]},
        ]
        final = twice(tag + " answer", messages=messages, tools=tools, stream=stream)
        assert final["stop_reason"] == "end_turn", final
        assert "18" in "".join(b.get("text", "") for b in final["content"]), final

    burst = [{"role": "user", "content": "burst: the same question fifty times"}]
    with ThreadPoolExecutor(50) as pool:
        answers = list(pool.map(
            lambda _: client.messages.with_raw_response.create(
                model=model, max_tokens=512, messages=burst),
            range(50)))
    seen["burst"] = [a.headers.get("x-baton-cache") for a in answers]
    texts = {a.parse().content[0].text for a in answers}
    assert len(texts) == 1, texts
    return seen


def block(b):
    if b.type == "tool_use":
        return {"type": "tool_use", "id": b.id, "name": b.name, "input": b.input}
    return {"type": "text", "text": b.text}


def plain_anthropic(message):
    return {"id": message.id, "content": [block(b) for b in message.content],
            "stop_reason": message.stop_reason}


def collect_anthropic(stream):
    out = {"id": None, "content": [], "stop_reason": None}
    partial = {}
    for event in stream:
        if event.type == "message_start":
            out["id"] = event.message.id
        elif event.type == "content_block_start":
            out["content"].append(block(event.content_block))
            partial[event.index] = ""
        elif event.type == "content_block_delta":
            if event.delta.type == "text_delta":
                out["content"][event.index]["text"] += event.delta.text
            elif event.delta.type == "input_json_delta":
                partial[event.index] += event.delta.partial_json
        elif event.type == "content_block_stop":
            if out["content"][event.index]["type"] == "tool_use" and partial[event.index]:
                out["content"][event.index]["input"] = json.loads(partial[event.index])
        elif event.type == "message_delta":
            out["stop_reason"] = event.delta.stop_reason
    return out


def openai_responses_exchange(base, key):
    import openai

    client = openai.OpenAI(
        base_url=base + "/v1",
        api_key=PROVIDER_KEY,
        default_headers={"x-baton-key": key},
        max_retries=0,
    )
    tools = [{"type": "function", "name": "get_weather", "description": "The weather in a city",
              "parameters": WEATHER_SCHEMA}]
    seen = {}

    def create(tag, **kwargs):
        raw = client.responses.with_raw_response.create(model="gpt-5", tools=tools, **kwargs)
        seen.setdefault(tag, []).append(raw.headers.get("x-baton-cache"))
        return raw.parse()

    def read(response, stream):
        if not stream:
            calls = [{"call_id": o.call_id, "name": o.name, "arguments": o.arguments}
                     for o in response.output if o.type == "function_call"]
            return {"id": response.id, "text": response.output_text, "calls": calls,
                    "usage": response.usage.input_tokens}
        out = {"id": None, "text": "", "calls": [], "usage": None}
        for event in response:
            if event.type == "response.output_text.delta":
                out["text"] += event.delta
            elif event.type == "response.completed":
                out["id"] = event.response.id
                out["usage"] = event.response.usage.input_tokens
                out["calls"] = [{"call_id": o.call_id, "name": o.name, "arguments": o.arguments}
                                for o in event.response.output if o.type == "function_call"]
        return out

    def twice(tag, stream, **kwargs):
        first = read(create(tag, stream=stream, **kwargs), stream)
        second = read(create(tag, stream=stream, **kwargs), stream)
        assert first == second, (first, second)
        assert seen[tag] == ["miss", "hit"], (tag, seen[tag])
        return first

    for stream, city in [(False, "Paris"), (True, "Rome")]:
        tag = "stream" if stream else "json"
        items = [{"role": "user", "content": f"What is the weather in {city}?"}]
        reply = twice(tag + " call", stream, input=items)
        (call,) = reply["calls"]
        assert call["name"] == "get_weather" and json.loads(call["arguments"]) == {"city": city}
        assert reply["usage"] > 0, reply
        items += [
            {"type": "function_call", "call_id": call["call_id"], "name": call["name"],
             "arguments": call["arguments"]},
            {"type": "function_call_output", "call_id": call["call_id"],
             "output": f"{city}: 18 degrees, sunny"},
        ]
        final = twice(tag + " answer", stream, input=items)
        assert "18" in final["text"], final
    return seen


def errors(base, key):
    """Each SDK against a gateway whose upstream does not answer in time: the exception the
    SDK raises must carry baton's explanation, not just a status code."""
    import anthropic
    import openai

    seen = {}
    client = openai.OpenAI(base_url=base + "/v1", api_key=PROVIDER_KEY,
                           default_headers={"x-baton-key": key}, max_retries=0)
    try:
        client.chat.completions.create(
            model="gpt-4o-mini", messages=[{"role": "user", "content": "hang, openai"}])
        raise AssertionError("no error")
    except openai.APIStatusError as e:
        assert e.status_code == 504, e
        assert "did not answer within" in str(e), str(e)
        assert "did not answer within" in e.message, e.message
        assert e.code == "upstream-timeout", (e.code, e.body)
        seen["openai"] = str(e)
    client = anthropic.Anthropic(base_url=base, api_key=PROVIDER_KEY,
                                 default_headers={"x-baton-key": key}, max_retries=0)
    try:
        client.messages.create(model="claude-sonnet-4-5", max_tokens=64,
                               messages=[{"role": "user", "content": "hang, anthropic"}])
        raise AssertionError("no error")
    except anthropic.APIStatusError as e:
        assert e.status_code == 504, e
        assert "did not answer within" in str(e), str(e)
        assert "did not answer within" in e.body["error"]["message"], e.body
        seen["anthropic"] = str(e)
    return seen


def main():
    vendor, base, key = sys.argv[1:4]
    run = {"openai": openai_exchange, "anthropic": anthropic_exchange,
           "openai-responses": openai_responses_exchange, "errors": errors}[vendor]
    print(json.dumps(run(base, key)))


if __name__ == "__main__":
    main()
