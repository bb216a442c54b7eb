#!/usr/bin/env bash
# Fine-tune a draft model for speculative decoding from the AR model train_mtp.sh produced.
#
#   stage 0  draft   keep --layers of the target's layers (SSD: first 2 + last 6 of 24), freeze
#                    the embedding, the final norm and the upper layers, train the lower layers
#                    and the next-token head (cross-entropy, plus --distill-weight x KL)
#   stage 1  bench   speculative decoding side by side with AR on test sentences: exact SD,
#                    SSD (β 0.1-0.4), PCG (θ for mean group sizes 4.5, 10.3) with the draft, and self-speculation with
#                    the target's MTP heads, γ ∈ {2,3,4} → <exp>/bench-speculative
#
# Needs <exp>/ar (stage 4 of train_mtp.sh), <exp>/data and <exp>/tokens. Runs on the bundled
# corpus's experiment (exp/minitts) unless LIBRITTS_ROOT is set (exp/libritts).
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root
. recipes/common.sh

stage=0
stop_stage=100
exp=""
layers=""
steps=""
distill_weight=0.5
distill_weight_set=""
threads=""
codec=""
teacher=""
bench_utterances=8
force_stages=()
verbose=()

usage() {
  sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --exp DIR              experiment directory of train_mtp.sh (default exp/minitts or exp/libritts)
  --layers LIST          target layers the draft keeps (default 0 for minitts, 0,1,-6,-5,-4,-3,-2,-1 for LibriTTS)
  --steps N              fine-tuning steps (default 200 for minitts, 50000 for LibriTTS)
  --distill-weight W     weight of the KL term to the target (default 1 for minitts, 0.5 for
                         LibriTTS; 0 = cross-entropy only)
  --codec DIR            codec for the bench (default checkpoints/codec-minitts)
  --teacher DIR          CTC teacher for the bench's CER (default checkpoints/ctc-minitts)
  --bench-utterances N   test sentences per decoder in the bench (default 8)
  --stage N / --stop-stage N
  --threads N            worker threads (default: all cores)
  --force-stage NAME     rerun a finished stage (draft)
  -v                     more logging from voxspec
  -h, --help             this help
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage="$2"; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage="$2"; shift 2 ;;
    --exp) exp="$2"; shift 2 ;;
    --layers) layers="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --distill-weight) distill_weight="$2"; distill_weight_set="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --codec) codec="$2"; shift 2 ;;
    --teacher) teacher="$2"; shift 2 ;;
    --bench-utterances) bench_utterances="$2"; shift 2 ;;
    --force-stage) force_stages+=("$2"); shift 2 ;;
    -v|-vv|-vvv) verbose+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
  esac
done

if [ -n "${LIBRITTS_ROOT:-}" ]; then
  exp="${exp:-exp/libritts}"; layers="${layers:-0,1,-6,-5,-4,-3,-2,-1}"; steps="${steps:-50000}"
else
  # One layer, 200 steps, KL weight 1: on the main job's model this draft keeps every
  # speculative row above AR (SSD β 0.4 1.46-1.63x, exact SD and PCG 1.14-1.21x over γ 2-4);
  # the 2-layer draft (0,-1) accepts no more and costs twice as much, and by 500 steps a draft
  # overfits (dev loss 2.0 → 2.4).
  exp="${exp:-exp/minitts}"; layers="${layers:-0}"; steps="${steps:-200}"
  distill_weight="${distill_weight_set:-1}"
fi
[ -f "$exp/ar/config.json" ] || {
  echo "error: no AR model at $exp/ar: run recipes/libritts/train_mtp.sh first (stage 4)" >&2
  exit 1
}

global=("${verbose[@]+"${verbose[@]}"}")
[ -n "$threads" ] && global+=(--threads "$threads")

build_voxspec

init_stages "$exp"

if run_stage 0 draft; then
  log "Stage 0 (draft): layers $layers of $exp/ar, $steps steps → $exp/draft"
  vx train draft --target "$exp/ar" --layers "$layers" \
    --data "$exp/data" --tokens "$exp/tokens" --out "$exp/draft" --steps "$steps" \
    --distill-weight "$distill_weight" $(resume_flag "$exp/draft")
  finish_stage draft
fi
codec="${codec:-checkpoints/codec-minitts}"
teacher="${teacher:-checkpoints/ctc-minitts}"
if run_stage 1 bench_speculative; then
  if [ -f "$exp/nar/config.json" ] && [ -f "$codec/config.json" ]; then
    log "Stage 1 (bench): speculative decoders vs AR on $bench_utterances test sentences → $exp/bench-speculative"
    cer=(--no-cer); [ -f "$teacher/config.json" ] && cer=(--teacher "$teacher")
    vx bench decode --exp "$exp" --codec "$codec" \
      --data "$exp/data" --max-utterances "$bench_utterances" --heads 1 --draft "$exp/draft" \
      --self-spec --gammas 2,3,4 "${cer[@]}" --out "$exp/bench-speculative"
    finish_stage bench_speculative
  else
    log "Stage 1 (bench) skipped: needs $exp/nar (train_mtp.sh stage 5) and the codec $codec"
  fi
fi
log "Draft model: $exp/draft"
