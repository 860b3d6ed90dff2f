#!/usr/bin/env bash
# test_overhead_stats.sh: overhead.py's estimators on synthetic turns (no GPU): see test_overhead_stats.py.
cd "$(dirname "$0")" && exec python3 test_overhead_stats.py
