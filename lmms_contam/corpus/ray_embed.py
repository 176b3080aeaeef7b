"""Corpus embedding on a Ray cluster: Ray Data streams a shard's images through a pool of embedder actors.

Each actor builds its embedder once from the same spec as the driver's (GPU actors when asked) and
decodes and embeds whole batches, so decoding runs in the actors, beside the model. Results come
back in source order and go through the same shard writer as the in-process path.
"""

from __future__ import annotations

import numpy as np
from PIL import Image

from lmms_contam.corpus.embed import decode
from lmms_contam.corpus.ingest import CorpusRecord, EmbeddedShard


class EmbedBatch:
    """A Ray Data actor: one embedder per actor, reused for every batch."""

    def __init__(self, spec: str, device: str) -> None:
        from lmms_contam.corpus.run import make_embedder

        self.embedder = make_embedder(spec, device)
        self.dim = self.embedder.embed([Image.new("RGB", (32, 32))]).shape[1]

    def __call__(self, batch: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        images, reasons = [], []
        for key, data in zip(batch["key"], batch["data"], strict=True):
            try:
                images.append(decode(bytes(data), str(key)))
                reasons.append("")
            except ValueError as exc:
                reasons.append(str(exc))
        ok = np.array([not reason for reason in reasons])
        vectors = np.zeros((len(reasons), self.dim), dtype=np.float32)
        if images:
            vectors[ok] = self.embedder.embed(images).astype(np.float32)
        return {"position": batch["position"], "vector": vectors, "reason": np.array(reasons, dtype=object)}


class RayDataEmbedding:
    """Embeds a shard with `actors` embedder actors (each with `gpus` GPUs) on the connected Ray cluster."""

    def __init__(self, spec: str, device: str = "cpu", actors: int = 1, gpus: float = 0.0,
                 batch_size: int = 32) -> None:  # fmt: skip
        import ray

        if not ray.is_initialized():
            raise ValueError("RayDataEmbedding needs a connected Ray cluster (corpus.runners.RayRunner)")
        self.ray, self.spec, self.device = ray, spec, device
        self.actors, self.gpus, self.batch_size = actors, gpus, batch_size

    def embed_shard(self, chunk: list[CorpusRecord]) -> EmbeddedShard:
        context = self.ray.data.DataContext.get_current()
        context.execution_options.preserve_order = True
        rows = [{"position": i, "key": r.key, "data": r.data} for i, r in enumerate(chunk)]
        embedded = self.ray.data.from_items(rows).map_batches(
            EmbedBatch, fn_constructor_args=(self.spec, self.device), batch_size=self.batch_size,
            concurrency=self.actors, num_gpus=self.gpus, batch_format="numpy",
        )  # fmt: skip
        positions, vectors, reasons = [], [], []
        for batch in embedded.iter_batches(batch_size=None, batch_format="numpy"):
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
