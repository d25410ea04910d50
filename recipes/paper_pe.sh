#!/usr/bin/env bash
# Every preference-estimation run of the paper's Table 1 and Fig. 3-4 (4 tasks x 3 algorithms x 3 variants),
# one after another on this node. Pass a filter to run a subset, e.g. `recipes/paper_pe.sh pe-g-s3 ppo`.
set -euo pipefail
here=$(dirname "$0")
task_filter=${1:-} algo_filter=${2:-} variant_filter=${3:-}
for task in pe-g-s2 pe-g-s3 pe-f-d8 pe-f-d6; do
  for algo in ppo grpo gspo; do
    for variant in vanilla as_only as_bt; do
      [[ -n $task_filter && $task != "$task_filter" ]] && continue
      [[ -n $algo_filter && $algo != "$algo_filter" ]] && continue
      [[ -n $variant_filter && $variant != "$variant_filter" ]] && continue
      echo "=== $task $algo $variant"
      "$here/train.sh" "$task" "$algo" "$variant"
    done
  done
done
