#!/usr/bin/env python3
"""An independent check of plantd's isolation forest against scikit-learn's (issue 31).

    python3 ml_sklearn.py API_BASE ADMIN_KEY

The same planted-anomaly data (8 features; 2% of the rows drawn from a wider box, as in
Liu, Ting and Zhou's experiments) is trained by plantd (through the API: dataset upload,
training job) and by scikit-learn's IsolationForest with the same hyperparameters (100 trees,
256 samples, contamination 0.02). Both score held-out rows; their ROC AUC against the planted
labels must be within 0.01. plantd's scores come from the batch test route and, again, from
the downloaded model scored by docs/score_model.py, which must agree to 1e-12.
"""
import io
import json
import os
import sys

import numpy as np
import requests
from sklearn.ensemble import IsolationForest
from sklearn.metrics import roc_auc_score

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "docs"))
import score_model  # noqa: E402

BASE, KEY = sys.argv[1].rstrip("/"), sys.argv[2]
H = {"Authorization": f"Bearer {KEY}"}
FAILED = []


def ok(step):
    print(f"ok {step}", flush=True)


def check(cond, step, detail=""):
    if cond:
        ok(step)
    else:
        FAILED.append(step)
        print(f"FAIL {step} {detail}", file=sys.stderr, flush=True)


def data(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(0.0, 1.0, size=(n, 8))
    y = rng.random(n) < 0.02
    x[y] = rng.uniform(-6.0, 6.0, size=(int(y.sum()), 8))
    return x, y


def call(method, path, **kw):
    r = requests.request(method, BASE + path, headers=H, timeout=60, **kw)
    if r.status_code >= 300:
        raise SystemExit(f"{method} {path}: {r.status_code} {r.text}")
    return r


def main():
    train_x, _ = data(20_000, 1)
    test_x, test_y = data(10_000, 2)
    names = [f"f{i}" for i in range(8)]
    csv = io.StringIO()
    csv.write(",".join(names) + "\n")
    for row in train_x:
        csv.write(",".join(repr(float(v)) for v in row) + "\n")
    ds = call("POST", "/ml/datasets", json={"name": "sklearn peer"}).json()["data"]["id"]
    call("POST", f"/ml/datasets/{ds}/upload", files={"file": ("train.csv", csv.getvalue())})
    ok("uploaded")
    job = call("POST", "/ml/training", json={
        "name": "peer", "dataset_id": ds, "algorithm": "isolation_forest",
        "hyperparameters": {"n_estimators": 100, "max_samples": 256, "contamination": 0.02, "seed": 11},
    }).json()["data"]["id"]
    import time
    for _ in range(600):
        j = call("GET", f"/ml/training/{job}").json()["data"]
        if j["status"] in ("completed", "failed", "cancelled"):
            break
        time.sleep(0.1)
    check(j["status"] == "completed", "trained", j)
    model = j["model_id"]
    flagged = j["metrics"]["flagged"] / j["metrics"]["rows"]
    check(abs(flagged - 0.02) < 0.005, "contamination flags about that share", flagged)

    rows = [dict(zip(names, map(float, r))) for r in test_x]
    plantd = []
    for i in range(0, len(rows), 5000):
        res = call("POST", f"/ml/models/{model}/test", json={"rows": rows[i:i + 5000]}).json()["data"]["results"]
        plantd += [r["anomaly_score"] for r in res]
    plantd = np.array(plantd)
    sk = IsolationForest(n_estimators=100, max_samples=256, contamination=0.02, random_state=11).fit(train_x)
    sk_scores = -sk.score_samples(test_x)
    auc_plantd = roc_auc_score(test_y, plantd)
    auc_sk = roc_auc_score(test_y, sk_scores)
    print(f"AUC plantd {auc_plantd:.4f} scikit-learn {auc_sk:.4f}", flush=True)
    check(abs(auc_plantd - auc_sk) <= 0.01, "auc within 0.01 of scikit-learn", (auc_plantd, auc_sk))
    # Scores mean the same: close to scikit-learn's on the same rows (different trees).
    check(np.corrcoef(plantd, sk_scores)[0, 1] > 0.95, "scores agree with scikit-learn's")

    downloaded = call("GET", f"/ml/models/{model}/download").json()
    mine = np.array([score_model.score(downloaded, list(map(float, r))) for r in test_x[:2000]])
    check(np.max(np.abs(mine - plantd[:2000])) < 1e-12, "downloaded model scores as the API")
    if FAILED:
        raise SystemExit(f"{len(FAILED)} check(s) failed: {', '.join(FAILED)}")
    ok("all checks")


if __name__ == "__main__":
    main()
