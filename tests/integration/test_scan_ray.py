"""The scan on a real local Ray cluster: the same shards, the same code path, the same results."""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import asdict
from pathlib import Path

import numpy as np
import pandas as pd
import psutil
import pytest
import ray
from helpers.benchmark_copies import write_corpus_folder
from helpers.benchmark_fixtures import write_benchmark_copies
from helpers.corpora import corpus_files, write_folder
from helpers.datacomp import unit, write_shard
from helpers.fixtures import real_photos
from PIL import Image

from lmms_contam.corpus.datacomp import import_datacomp
from lmms_contam.corpus.embed import EfficientNetLite0Embedder
from lmms_contam.corpus.embedder_configs import embedder_config
from lmms_contam.corpus.ingest import embed_corpus, records
from lmms_contam.corpus.ray_embed import RayDataEmbedding
from lmms_contam.corpus.runners import LocalRunner, RayRunner
from lmms_contam.corpus.scan import scan_shards


@pytest.fixture(scope="module")
def cluster():
    # One GPU declared as a resource (none is used: the embedder stays on the CPU), so that Ray
    # schedules GPU actors here as it would on a GPU node.
    ray.init(num_cpus=2, num_gpus=1, include_dashboard=False, log_to_driver=False)
    runner = RayRunner()
    yield runner
    ray.shutdown()


@pytest.fixture(scope="module")
def shards(tmp_path_factory):
    """Ten float16 shards of random unit vectors, queries with planted near-copies in shards 2 and 7."""
    folder = tmp_path_factory.mktemp("shards")
    rng = np.random.default_rng(1)
    corpus = rng.normal(size=(20_000, 128)).astype(np.float32)
    corpus /= np.linalg.norm(corpus, axis=1, keepdims=True)
    queries = rng.normal(size=(64, 128)).astype(np.float32)
    queries[:2] = corpus[[4_321, 15_000]] + rng.normal(scale=0.03, size=(2, 128))
    queries /= np.linalg.norm(queries, axis=1, keepdims=True)
    listed, offset = [], 0
    for number, rows in enumerate(np.array_split(corpus, 10)):
        path = folder / f"img_emb_{number}.npy"
        np.save(path, rows.astype(np.float16))
        listed.append((f"img_emb_{number}", path, offset))
        offset += len(rows)
    return queries, listed, folder


def test_ray_tasks_give_the_in_process_results(cluster, shards, tmp_path):
    queries, listed, _ = shards
    local = scan_shards(queries, listed, tmp_path / "local", k=10, chunk=700, runner=LocalRunner())
    on_ray = scan_shards(queries, listed, tmp_path / "ray", k=10, chunk=700, runner=cluster)
    assert (on_ray.ids == local.ids).all() and (on_ray.above == local.above).all()
    np.testing.assert_allclose(on_ray.sims, local.sims, atol=1e-5)
    assert list(on_ray.ids[:2, 0]) == [4_321, 15_000]
    # The driver saved every shard's result; a rerun reads them and schedules no task.
    assert len(list((tmp_path / "ray").glob("*.topk.npz"))) == 10
    again = scan_shards(queries, listed, tmp_path / "ray", k=10, runner=cluster)
    assert (again.ids == on_ray.ids).all()


def test_a_bad_shard_fails_the_ray_scan_with_its_row(cluster, shards, tmp_path):
    queries, listed, folder = shards
    broken = np.load(listed[3][1]).astype(np.float32)
    broken[5, 0] = np.nan
    np.save(folder / "broken.npy", broken)
    with pytest.raises(ValueError, match=rf"corpus row {listed[3][2] + 5} holds NaN"):
        scan_shards(queries, [*listed[:3], ("broken", folder / "broken.npy", listed[3][2])], tmp_path, runner=cluster)


def test_scan_command_with_ray_writes_what_the_in_process_scan_writes(tmp_path):
    copies = write_benchmark_copies(tmp_path)
    embed_corpus(write_corpus_folder(tmp_path / "images"), tmp_path / "corpus", EfficientNetLite0Embedder(),
                 shard_size=3)  # fmt: skip
    outputs = {}
    for name, extra in (("local", []), ("ray", ["--ray"])):
        command = [sys.executable, "-m", "lmms_contam.cli", "scan", "--eval", "mmstar", "--corpus",
                   str(tmp_path / "corpus"), "--out", str(tmp_path / name), "--embedder", "efficientnet-lite0",
                   "--originals", str(copies["mmstar"]), *extra]  # fmt: skip
        done = subprocess.run(command, capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        outputs[name] = pd.read_parquet(tmp_path / name / "mmstar.matches.parquet")
    summary = json.loads((tmp_path / "ray" / "mmstar.summary.json").read_text())
    assert summary["mode"]["runner"].startswith("Ray") and summary["image_only_rate"] == 0.5
    assert summary["mode"]["resubmitted_after_a_lost_worker"] == []
    local, on_ray = outputs["local"], outputs["ray"]
    assert local["original_id"].tolist() == on_ray["original_id"].tolist()
    assert local["top_ids"].map(list).tolist() == on_ray["top_ids"].map(list).tolist()
    np.testing.assert_allclose(np.stack(on_ray["top_similarities"]), np.stack(local["top_similarities"]), atol=1e-5)
    assert local["top_captions"].map(list).tolist() == on_ray["top_captions"].map(list).tolist()


@pytest.mark.parametrize("gpus", [0, 1])
def test_ray_data_embedding_writes_the_in_process_corpus(cluster, tmp_path, gpus):
    source = write_folder(tmp_path / "images", corpus_files())
    config = embedder_config("efficientnet-lite0")
    embedder = config.build()
    local = embed_corpus(source, tmp_path / "local", embedder, shard_size=5)
    engine = RayDataEmbedding(config, embedder.preparer, actors=1, gpus=gpus, batch_size=4)
    # GPU actors get prepared batches from CPU tasks; CPU actors decode themselves (Ray Data fuses them).
    stats = engine.dataset(list(records(source))[:5]).materialize().stats().splitlines()
    stages = [line.split(":")[0].split(" ", 2)[2] for line in stats if line.startswith("Operator")]
    fused = "MapBatches(prepare_batch)->MapBatches(EmbedPrepared)"
    assert stages[1:] == (["MapBatches(prepare_batch)", "MapBatches(EmbedPrepared)"] if gpus else [fused])
    on_ray = embed_corpus(source, tmp_path / "ray", embedder, shard_size=5, engine=engine)
    assert (on_ray.shards, on_ray.vectors, on_ray.skipped) == (local.shards, local.vectors, local.skipped)
    assert on_ray.skipped == 2  # the truncated and the zero-byte file
    for number in range(local.shards):
        for part in (f"img_emb/img_emb_{number}.npy",):
            if (tmp_path / "local" / part).exists():
                np.testing.assert_allclose(np.load(tmp_path / "ray" / part), np.load(tmp_path / "local" / part),
                                           atol=1e-5)  # fmt: skip
        metadata = f"metadata/metadata_{number}.parquet"
        if (tmp_path / "local" / metadata).exists():
            assert pd.read_parquet(tmp_path / "ray" / metadata).equals(pd.read_parquet(tmp_path / "local" / metadata))
        skipped = f"skipped/skipped_{number}.jsonl"
        assert (tmp_path / "ray" / skipped).read_text() == (tmp_path / "local" / skipped).read_text()


def _kill_a_worker_mid_job(title: str, done: threading.Event, killed: list[int]) -> None:
    """SIGKILL a worker process while it executes the job `ray::<function>`: it is stopped first and killed only
    if its title still names the job, so the kill lands mid-job and never between two jobs."""
    while not done.is_set():
        for process in psutil.process_iter(["pid", "cmdline"]):
            if title not in " ".join(process.info["cmdline"] or []):
                continue
            with contextlib.suppress(ProcessLookupError, psutil.NoSuchProcess):
                os.kill(process.info["pid"], signal.SIGSTOP)
                if title in " ".join(psutil.Process(process.info["pid"]).cmdline()):
                    os.kill(process.info["pid"], signal.SIGKILL)
                    killed.append(process.info["pid"])
                    return
                os.kill(process.info["pid"], signal.SIGCONT)
        time.sleep(0.002)


def test_a_job_whose_worker_is_killed_is_submitted_again_and_recorded(cluster):
    """A Ray worker killed mid-job: the runner submits that job again, every job's result arrives once, and the
    loss is recorded (the scan's summary counts it)."""

    def slow_product(shared: np.ndarray, job: int) -> float:  # defined here: Ray ships it by value
        time.sleep(2.0)
        return float(shared.sum() * job)

    killed: list[int] = []
    done = threading.Event()
    killer = threading.Thread(target=_kill_a_worker_mid_job, args=("ray::slow_product", done, killed))
    killer.start()
    results = dict(cluster.imap(slow_product, np.ones(3), [1, 2, 3, 4]))
    done.set()
    killer.join()
    assert killed, "no worker was running the job when the killer looked"
    assert results == {0: 3.0, 1: 6.0, 2: 9.0, 3: 12.0}
    assert [entry["lost"] for entry in cluster.resubmitted] == ["WorkerCrashedError"]
    dict(cluster.imap(lambda shared, job: job, None, [1]))  # the next scan starts its own count
    assert cluster.resubmitted == []


RAY_NO_AUTH = {"RAY_AUTH_MODE": "disabled"}


NODE_PORTS = range(20_000, 32_768)  # above Ray's worker ports, below the kernel's ephemeral ones


def _free_ports(count: int) -> list[int]:
    """Ports free now and outside the range the kernel hands out for outgoing connections, so that no connection
    another node opens meanwhile can take one before its node binds it."""
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.choice(NODE_PORTS)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
        if port not in chosen:
            chosen.append(port)
    return chosen


def _node_ports() -> list[str]:
    """Ports a node would otherwise take at their fixed defaults: several nodes share this machine."""
    names = ("node-manager", "object-manager", "dashboard-agent-listen", "dashboard-agent-grpc", "runtime-env-agent",
             "metrics-export")  # fmt: skip
    return [f"--{name}-port={port}" for name, port in zip(names, _free_ports(len(names)), strict=True)]


CPUS_OF = """import sys, time, ray
ray.init(address=sys.argv[1], log_to_driver=False)
deadline = time.monotonic() + 90
while ray.cluster_resources().get("CPU", 0) < int(sys.argv[2]) and time.monotonic() < deadline:
    time.sleep(0.5)
print(int(ray.cluster_resources().get("CPU", 0)))
"""


def _wait_for_cpus(address: str, cpus: int, env: dict, temp: str) -> None:
    """Until the cluster offers `cpus` CPUs; else fail with the nodes' own last words (their logs go with `temp`)."""
    found = subprocess.run([sys.executable, "-c", CPUS_OF, address, str(cpus)], capture_output=True, text=True,
                           timeout=180, env=env)  # fmt: skip
    if found.stdout.strip() != str(cpus):
        logs = sorted(Path(temp).glob("session_*/logs/raylet*.out"))
        last = "\n".join(f"{log.name}: {log.read_text(errors='replace')[-600:]}" for log in logs)
        raise RuntimeError(f"{found.stdout.strip() or '?'} of {cpus} CPUs joined: {found.stderr[-600:]}\n{last}")


@contextlib.contextmanager
def _local_cluster(workers: int) -> Iterator[str]:
    """A head with no CPUs of its own and `workers` nodes of one CPU each: `ray start --block` processes on this
    machine, so every task runs on a worker node. Yields the head's address once every worker has joined (each
    is started once the one before it has). Its files (and the address file a bare `ray.init()` would join) stay
    in a folder of its own, removed afterwards."""
    ray_cli = str(Path(sys.executable).parent / "ray")
    temp = tempfile.mkdtemp(prefix="ray", dir="/tmp")  # short: Ray's socket paths must fit in 107 bytes
    (gcs,) = _free_ports(1)
    # A cluster on 127.0.0.1 for the test alone: no token (`ray start --head` turns token auth on by default).
    env = {**os.environ, **RAY_NO_AUTH}
    common = ["start", "--block", "--disable-usage-stats", f"--temp-dir={temp}", "--object-store-memory=100000000"]
    head = [*common, "--head", f"--port={gcs}", "--num-cpus=0", "--num-gpus=0", "--include-dashboard=false"]
    nodes = [subprocess.Popen([ray_cli, *head, *_node_ports()], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=env)]  # fmt: skip
    address = f"127.0.0.1:{gcs}"
    try:
        for _ in range(120):  # the head's GCS answers within a minute
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", gcs), timeout=1):
                break
            time.sleep(0.5)
        else:
            raise RuntimeError(f"the Ray head did not answer at {address} within a minute")
        for joined in range(1, workers + 1):  # one at a time: nodes starting together race for their socket names
            worker = [*common, f"--address={address}", "--num-cpus=1", "--num-gpus=0", *_node_ports()]
            nodes.append(
                subprocess.Popen([ray_cli, *worker], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
            )
            _wait_for_cpus(address, joined, env, temp)
        yield address
    finally:
        for node in reversed(nodes):  # `ray start --block` stops its node's processes when terminated
            node.terminate()
        for node in nodes:
            try:
                node.wait(timeout=60)
            except subprocess.TimeoutExpired:
                node.kill()
        shutil.rmtree(temp, ignore_errors=True)


@pytest.fixture
def two_node_cluster():
    with _local_cluster(workers=2) as address:
        yield address


def test_a_cluster_without_a_cpu_stops_the_jobs_with_a_clear_error():
    """Worker nodes that never join (or all die): the runner says so and stops, instead of waiting for ever."""
    code = (
        "import sys\nfrom lmms_contam.corpus.runners import RayRunner\n"
        "list(RayRunner(sys.argv[1], no_cpu_limit_s=3).imap(lambda shared, job: job, None, [1, 2]))"
    )
    with _local_cluster(workers=0) as address:
        started = time.monotonic()
        done = subprocess.run([sys.executable, "-c", code, address], capture_output=True, text=True, timeout=120,
                              env={**os.environ, **RAY_NO_AUTH})  # fmt: skip
    assert done.returncode != 0
    assert "ClusterWithoutCpu" in done.stderr and "no node of the cluster has offered a CPU for 3 s" in done.stderr
    assert "(1 node(s) alive, 2 job(s) waiting)" in done.stderr
    assert time.monotonic() - started < 60


def test_a_scan_on_two_nodes_that_loses_a_worker_gives_the_undisturbed_answer(two_node_cluster, tmp_path):
    """`lmms-contam scan --ray ADDRESS` on a cluster of two worker nodes, once undisturbed and once with a worker
    killed mid-shard: the same matches, ids and similarities, every shard's result saved once, and the summary
    names the shard that was scanned again."""
    photos = real_photos()[:12]
    eval_folder = tmp_path / "eval"
    eval_folder.mkdir()
    for number, photo in enumerate(photos):
        (eval_folder / f"photo{number:02d}.png").write_bytes(photo)
    embedder = embedder_config("pixels").build()
    planted = embedder.embed([Image.open(io.BytesIO(photo)) for photo in photos[:4]])
    rng = np.random.default_rng(7)
    release = tmp_path / "datacomp"
    release.mkdir()
    for number in range(8):  # copies of photos 0-3 in shards 1, 3, 5 and 6
        vectors = unit(rng.normal(size=(500, planted.shape[1])))
        if number in (1, 3, 5, 6):
            vectors[100 + number] = planted[(1, 3, 5, 6).index(number)]
        write_shard(
            release, f"{number:08d}", vectors.astype(np.float16), [f"shard {number} row {i}" for i in range(500)]
        )
    (tmp_path / "recipe.json").write_text(json.dumps(asdict(embedder.recipe)))
    import_datacomp(release, tmp_path / "corpus", tmp_path / "recipe.json")

    def scan(out: str) -> subprocess.CompletedProcess:
        command = [sys.executable, "-m", "lmms_contam.cli", "scan", "--eval-folder", str(eval_folder), "--corpus",
                   str(tmp_path / "corpus"), "--embedder", "pixels", "--out", str(tmp_path / out), "--ray",
                   two_node_cluster]  # fmt: skip
        return subprocess.run(command, capture_output=True, text=True, timeout=300, env={**os.environ, **RAY_NO_AUTH})

    undisturbed = scan("undisturbed")
    assert undisturbed.returncode == 0, undisturbed.stderr[-3000:]
    done, killed = threading.Event(), []
    killer = threading.Thread(target=_kill_a_worker_mid_job, args=("ray::_scan_shard", done, killed))
    killer.start()
    disturbed = scan("disturbed")
    done.set()
    killer.join()
    assert disturbed.returncode == 0, disturbed.stderr[-3000:]
    assert len(killed) == 1, "no worker was caught running a shard"
    (name,) = [p.name for p in (tmp_path / "undisturbed").glob("*.matches.parquet")]
    before, after = (pd.read_parquet(tmp_path / run / name) for run in ("undisturbed", "disturbed"))
    assert after["original_id"].tolist() == before["original_id"].tolist()
    assert after["top_ids"].map(list).tolist() == before["top_ids"].map(list).tolist()
    assert np.array_equal(np.stack(after["top_similarities"]), np.stack(before["top_similarities"]))
    assert [ids[0] for ids in before["top_ids"][:4]] == [1 * 500 + 101, 3 * 500 + 103, 5 * 500 + 105, 6 * 500 + 106]
    for run in ("undisturbed", "disturbed"):  # one saved result per shard: none counted twice, none missed
        saved = sorted(p.name.split(".")[0] for p in (tmp_path / run).rglob("*.topk.npz"))
        assert saved == [f"img_emb_{number}" for number in range(8)], run
    summaries = [
        json.loads(next((tmp_path / run).glob("*.summary.json")).read_text()) for run in ("undisturbed", "disturbed")
    ]
    assert summaries[0]["image_only_rate"] == summaries[1]["image_only_rate"] == 4 / 12
    assert summaries[0]["mode"]["resubmitted_after_a_lost_worker"] == []
    (lost,) = summaries[1]["mode"]["resubmitted_after_a_lost_worker"]
    assert lost["lost"] == "WorkerCrashedError" and lost["job"] in {f"img_emb_{number}" for number in range(8)}
