"""Corpus embedding on a Ray cluster: Ray Data streams a shard's images through two stages.

CPU tasks decode and prepare batches (the embedder's `Preparer`, shipped without the model) while a
pool of GPU actors runs the model on batches already prepared, so the GPUs do not wait for decoding.
With CPU actors, Ray Data fuses the two stages into the actors (their resources match), which on a
CPU is the cheaper order anyway (see ingest.default_decode_threads). Results come back in source
order and go through the same shard writer as the in-process path.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from lmms_contam.corpus.embed import Preparer
from lmms_contam.corpus.embedder_configs import EmbedderConfig
from lmms_contam.corpus.ingest import CorpusRecord, EmbeddedShard, prepared_or_error


def prepare_batch(
    batch: dict[str, np.ndarray], preparer: Preparer, shape: tuple[int, ...], dtype: str
) -> dict[str, np.ndarray]:
    """The CPU stage: an image that cannot be decoded keeps its row (zeros) and gets its reason."""
    prepared = np.zeros((len(batch["key"]), *shape), dtype=dtype)
    reasons = []
    for row, (key, data) in enumerate(zip(batch["key"], batch["data"], strict=True)):
        item = prepared_or_error(bytes(data), str(key), preparer)
        if isinstance(item, ValueError):
            reasons.append(str(item))
        else:
            prepared[row] = np.asarray(item)
            reasons.append("")
    return {"position": batch["position"], "prepared": prepared, "reason": np.array(reasons, dtype=object)}


class EmbedPrepared:
    """A Ray Data actor: one embedder per actor, reused for every batch."""

    def __init__(self, config: EmbedderConfig, device: str) -> None:
        self.embedder = config.build(device)
        self.dim = self.embedder.embed([Image.new("RGB", (32, 32))]).shape[1]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        ok = batch["reason"] == ""
        vectors = np.zeros((len(ok), self.dim), dtype=np.float32)
        if ok.any():
            vectors[ok] = self.embedder.embed_prepared(iter(batch["prepared"][ok])).astype(np.float32)
        return {"position": batch["position"], "vector": vectors, "reason": batch["reason"]}


class RayDataEmbedding:
    """Embeds a shard on the connected Ray cluster: `preparer` (the driver's embedder's) on CPU tasks,
    then `actors` actors of the embedder `config` (shipped as data: a file path may not exist on a worker),
    each with `gpus` GPUs."""

    def __init__(
        self,
        config: EmbedderConfig,
        preparer: Preparer,
        device: str = "cpu",
        actors: int = 1,
        gpus: float = 0.0,
        batch_size: int = 32,
    ) -> None:
        import ray

        if not ray.is_initialized():
            raise ValueError("RayDataEmbedding needs a connected Ray cluster (corpus.runners.RayRunner)")
        self.ray, self.config, self.preparer, self.device = ray, config, preparer, device
        self.actors, self.gpus, self.batch_size = actors, gpus, batch_size
        blank = np.asarray(preparer(Image.new("RGB", (32, 32))))
        self.prepared_shape, self.prepared_dtype = blank.shape, str(blank.dtype)

    def dataset(self, chunk: list[CorpusRecord]):
        """The lazy Ray Data pipeline for one shard: rows of position, vector and skip reason."""
        context = self.ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        rows = [{"position": i, "key": r.key, "data": r.data} for i, r in enumerate(chunk)]
        prepared = self.ray.data.from_items(rows).map_batches(
            prepare_batch,
            fn_kwargs={"preparer": self.preparer, "shape": self.prepared_shape, "dtype": self.prepared_dtype},
            batch_size=self.batch_size,
            batch_format="numpy",
        )
        return prepared.map_batches(
            EmbedPrepared,
            fn_constructor_args=(self.config, self.device),
            batch_size=self.batch_size,
            compute=self.ray.data.ActorPoolStrategy(size=self.actors),
            num_gpus=self.gpus,
            batch_format="numpy",
        )

    def embed_shard(self, chunk: list[CorpusRecord]) -> EmbeddedShard:
        positions, vectors, reasons = [], [], []
        for batch in self.dataset(chunk).iter_batches(batch_size=None, batch_format="numpy"):
            positions += batch["position"].tolist()
            vectors.append(batch["vector"])
            reasons += batch["reason"].tolist()
        order = np.argsort(positions, kind="stable")
        stacked = np.concatenate(vectors)[order]
        reasons = [reasons[i] for i in order]
        kept = [record for record, reason in zip(chunk, reasons, strict=True) if not reason]
        skipped = [{"source": r.key, "reason": reason} for r, reason in zip(chunk, reasons, strict=True) if reason]
        keep = np.array([not reason for reason in reasons])
        return EmbeddedShard(kept, stacked[keep] if kept else None, skipped)  # the writer stores the recipe's dtype
