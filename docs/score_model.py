#!/usr/bin/env python3
"""Scores rows with a model downloaded from plantd (docs/ml-model-format.md), in plain Python.

    python3 docs/score_model.py model.json rows.csv     # prints score,is_anomaly per row

rows.csv has a header naming (at least) the model's features; an empty cell is missing.
"""
import csv
import json
import math
import sys


def load(path):
    with open(path) as f:
        model = json.load(f)
    if model.get("format") != "plantd-isolation-forest" or model.get("format_version") != 1:
        raise SystemExit("not a plantd-isolation-forest version 1 model")
    return model


def path_length(tree, row, fill):
    at = 0
    while True:
        f = tree["feature"][at]
        if f < 0:
            return tree["value"][at]
        v = row[f]
        if v is None or math.isnan(v):
            v = fill[f]
        at = tree["left"][at] if v < tree["value"][at] else tree["right"][at]


def score(model, row):
    """The anomaly score of `row` (a list of floats or None, in the order of model["features"])."""
    trees = model["trees"]
    mean = sum(path_length(t, row, model["fill"]) for t in trees) / len(trees)
    if model["c_max_samples"] == 0:
        return 0.5
    return 2.0 ** (-mean / model["c_max_samples"])


def main():
    model = load(sys.argv[1])
    with open(sys.argv[2], newline="") as f:
        reader = csv.DictReader(f)
        print("score,is_anomaly")
        for r in reader:
            row = [float(r[n]) if r.get(n, "").strip() else None for n in model["features"]]
            s = score(model, row)
            print(f"{s!r},{str(s > model['threshold']).lower()}")


if __name__ == "__main__":
    main()
