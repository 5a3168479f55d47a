"""Download throughput: Glassbox's DownloadManager against curl, same file, same local server.

Serves the SmolLM2 test model from tests/support/hub_server.FakeHub on 127.0.0.1
and downloads it N times with each client. Prints MB/s (10^6 bytes/s); it does
not pass or fail.

    python bench/download_throughput.py [--runs 5] [--model PATH] [--cdn]

Ours includes what a real download does: ranged GET through huggingface_hub's
session, writing the .part, sha256 while writing, the final size/sha256 check,
fsync and rename. curl only writes the file (``curl -s -o``); "curl + sha256sum"
adds a separate hashing pass for a like-for-like comparison.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from huggingface_hub import constants  # noqa: E402
from huggingface_hub.utils import close_session  # noqa: E402

from app.core.models.downloads import DownloadManager, DownloadState  # noqa: E402
from app.core.models.hub import HubClient  # noqa: E402
from app.paths import default_paths  # noqa: E402
from tests.support.hub_server import FakeHub  # noqa: E402
from tests.support.models import smollm2_path  # noqa: E402

REPO = "bench/SmolLM2-GGUF"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--model", type=Path, default=smollm2_path())
    ap.add_argument("--cdn", action="store_true", help="redirect to a second origin, like the real Hub")
    args = ap.parse_args()
    model: Path = args.model
    size = model.stat().st_size
    constants.HF_HUB_DISABLE_TELEMETRY = True
    with FakeHub(cdn_redirect=args.cdn) as hub, tempfile.TemporaryDirectory() as tmp:
        constants.ENDPOINT = hub.url
        constants.HUGGINGFACE_CO_URL_TEMPLATE = hub.url + "/{repo_id}/resolve/{revision}/{filename}"
        hub.add_repo(REPO, {model.name: model})
        file = HubClient(use_login_token=False).repo_files(REPO).files[0]
        url = f"{hub.url}/{REPO}/resolve/main/{model.name}"
        ours, curl, curl_hash = [], [], []
        for run in range(args.runs):
            out = Path(tmp) / f"curl-{run}.gguf"
            t0 = time.perf_counter()
            subprocess.run(["curl", "-s", "-L", "-o", str(out), url], check=True)
            curl.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            subprocess.run(["sha256sum", str(out)], check=True, capture_output=True)
            curl_hash.append(curl[-1] + time.perf_counter() - t1)
            out.unlink()

            home = Path(tmp) / f"home-{run}"
            paths = default_paths({"GLASSBOX_HOME": str(home)}).ensure()
            m = DownloadManager(paths, use_login_token=False)
            m.start()
            t0 = time.perf_counter()
            st = m.wait(m.add(file), timeout=600)
            ours.append(time.perf_counter() - t0)
            m.shutdown()
            assert st.state is DownloadState.DONE, st.error
            shutil.rmtree(home)
        close_session()

    def mbps(times: list[float]) -> str:
        rates = [size / t / 1e6 for t in times]
        return f"median {statistics.median(rates):7.1f} MB/s  (min {min(rates):.1f}, max {max(rates):.1f})"

    print(f"{model.name}: {size:,} bytes, {args.runs} runs, local fake Hub{' with CDN redirect' if args.cdn else ''}")
    print(f"  Glassbox DownloadManager (incl. sha256, fsync, rename): {mbps(ours)}")
    print(f"  curl -o                                              : {mbps(curl)}")
    print(f"  curl -o, then sha256sum                              : {mbps(curl_hash)}")

    def median_mbps(times: list[float]) -> float:
        return round(statistics.median(size / t / 1e6 for t in times), 1)

    print(
        json.dumps(
            {
                "bytes": size,
                "runs": args.runs,
                "glassbox_mb_s": median_mbps(ours),
                "curl_mb_s": median_mbps(curl),
                "curl_then_sha256sum_mb_s": median_mbps(curl_hash),
            }
        )
    )


if __name__ == "__main__":
    main()
