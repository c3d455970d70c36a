#!/usr/bin/env python3
"""Projects word vectors in GloVe's text format onto their first principal components, for a
model whose word table is narrower than the vectors (the compact tensor network's n = 70
against GloVe's 100): the vectors centred, projected on the N directions of largest
variance (in order, each direction's sign fixed so that its largest coordinate is
positive), written in the same format with 6 significant digits.

usage: project-word-vectors.py IN.txt OUT.txt --dimensions N

scripts/fetch-glove.sh writes IN (data/glove/glove-6b-100d.txt); docs/trees.md says what a
tree config's word_vectors does with OUT.
"""
import argparse
import os

import numpy as np


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("source")
    parser.add_argument("output")
    parser.add_argument("--dimensions", type=int, required=True)
    args = parser.parse_args()
    words, rows = [], []
    with open(args.source) as f:
        for number, line in enumerate(f, 1):
            fields = line.rstrip("\n").split(" ")
            words.append(fields[0])
            rows.append(np.array(fields[1:], dtype=np.float64))
            if len(rows[-1]) != len(rows[0]):
                raise SystemExit(f"{args.source}:{number}: {len(rows[-1])} values where line 1 has {len(rows[0])}")
    vectors = np.stack(rows)
    if not 0 < args.dimensions <= vectors.shape[1]:
        raise SystemExit(f"--dimensions must be 1 to {vectors.shape[1]}, got {args.dimensions}")
    centred = vectors - vectors.mean(axis=0)
    # The eigenvectors of the covariance, largest eigenvalue first.
    values, directions = np.linalg.eigh(centred.T @ centred / len(centred))
    order = np.argsort(values)[::-1][:args.dimensions]
    directions = directions[:, order]
    directions *= np.sign(directions[np.abs(directions).argmax(axis=0), range(args.dimensions)])
    projected = centred @ directions
    kept = values[order].sum() / values.sum()
    partial = args.output + ".part"
    with open(partial, "w") as out:
        for word, row in zip(words, projected):
            out.write(word + " " + " ".join(f"{v:.6g}" for v in row) + "\n")
    os.replace(partial, args.output)
    print(f"project-word-vectors: {len(words)} words, {vectors.shape[1]} -> {args.dimensions} dimensions "
          f"({100 * kept:.1f} % of the variance), standard deviation {projected.std():.3f}, into {args.output}")


if __name__ == "__main__":
    main()
