"""Features in DataComp's release layout: `<shard>.npz` (l14_img, b32_img) beside `<shard>.parquet` (uid, url,
text)."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq


def unit(rows: np.ndarray) -> np.ndarray:
    return (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)


def write_shard(folder, name: str, l14: np.ndarray, texts: list[str]) -> None:
    np.savez(folder / f"{name}.npz", l14_img=l14, b32_img=unit(np.ones((len(l14), 8))))
    pq.write_table(pa.table({"uid": [f"{name}-{i}" for i in range(len(l14))], "url": [f"http://x/{name}/{i}"
                             for i in range(len(l14))], "text": texts}), folder / f"{name}.parquet")  # fmt: skip
