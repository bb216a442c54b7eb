#!/usr/bin/env bash
# Train the SpeechTokenizer codec and extract the codes the language models train on.
#
#   stage 0  prepare   corpus → manifests (train/dev/test.jsonl + summary.json)
#   stage 1  teacher   CTC teacher (log-mel → characters), the semantic target of RVQ-1; with
#                      --teacher phones: phone alignments (voxspec align, unless bundled)
#   stage 2  features  teacher features of every split → <exp>/features (--teacher phones:
#                      phone codes from the alignments)
#   stage 3  codec     SpeechTokenizer trained with RVQ-1 distillation → <exp>/codec
#   stage 4  extract   RVQ codes of every split → <exp>/tokens (token stores)
#   stage 5  eval      test split: MCD and CTC-teacher CER of the resynthesis with all layers
#                      and with RVQ-1 alone, CER of the original; encode/decode real-time
#                      factors on 10 s → <exp>/codec/eval.json, <exp>/codec/bench.json
#   (no vocoder stage: the codec's decoder produces the waveform itself)
#
# Runs on the bundled corpus datasets/minitts (--corpus kathleen: the bundled real voice, whose
# codec starts from the shipped minitts codec and distils to the shipped CTC teacher) unless
# LIBRITTS_ROOT points at a LibriTTS tree.
# Each finished stage leaves <exp>/.done/<stage>.done and is skipped on a rerun; --force-stage
# reruns one. Training stages resume from their newest checkpoint when rerun after an
# interruption. Everything the recipe does is a `voxspec` subcommand; see `voxspec --help`.
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root
. recipes/common.sh

stage=0
stop_stage=100
exp=""
threads=""
ctc_steps=""
codec_steps=""
preset=""
ctc_preset=""
align_steps=800
adversarial=()
corpus_name=minitts
teacher=""
init=""
force_stages=()
verbose=()

usage() {
  sed -n '2,21p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --stage N            first stage to run (default 0)
  --stop-stage N       last stage to run (default: all)
  --corpus NAME        bundled corpus: minitts (default) or kathleen
  --exp DIR            experiment directory (default exp/<corpus>, or exp/libritts with LIBRITTS_ROOT)
  --teacher DIR        use this CTC teacher instead of training one (stage 1 skipped; default
                       for kathleen: checkpoints/ctc-minitts); --teacher phones distils RVQ-1
                       to the phones of voxspec align's alignments instead (the shipped
                       kathleen codec's last stage; checkpoints/kathleen/codec/README.md)
  --init DIR           start the codec from this trained codec (default for kathleen:
                       checkpoints/codec-minitts)
  --threads N          worker threads (default: all cores)
  --ctc-steps N        CTC teacher steps (default 300 for minitts, 30000 for LibriTTS)
  --codec-steps N      codec steps (default 2000 for minitts, 2500 for kathleen, 200000 for
                       LibriTTS)
  --preset NAME        codec size: tiny, small (minitts default) or base (LibriTTS default)
  --ctc-preset NAME    teacher size: tiny, small (minitts default) or base (LibriTTS default)
  --align-steps N      voxspec align's Viterbi-training steps with --teacher phones (default 800)
  --adversarial        train the codec with MPD + MSD discriminators
  --force-stage NAME   rerun a finished stage (repeatable): prepare, teacher, features, ...
  -v                   more logging from voxspec
  -h, --help           this help
Environment: LIBRITTS_ROOT=/path/to/LibriTTS selects the real corpus (train-clean-100,
dev-clean, test-clean; set TRAIN_SUBSETS=train-clean-100,train-clean-360 for more).
CARGO_TARGET_DIR is honoured when locating the voxspec binary.
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage="$2"; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage="$2"; shift 2 ;;
    --exp) exp="$2"; shift 2 ;;
    --corpus) corpus_name="$2"; shift 2 ;;
    --teacher) teacher="$2"; shift 2 ;;
    --init) init="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --ctc-steps) ctc_steps="$2"; shift 2 ;;
    --codec-steps) codec_steps="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --ctc-preset) ctc_preset="$2"; shift 2 ;;
    --align-steps) align_steps="$2"; shift 2 ;;
    --adversarial) adversarial=(--adversarial); shift ;;
    --force-stage) force_stages+=("$2"); shift 2 ;;
    -v|-vv|-vvv) verbose+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
  esac
done

if [ -n "${LIBRITTS_ROOT:-}" ]; then
  corpus="$LIBRITTS_ROOT"
  exp="${exp:-exp/libritts}"
  train_subsets="${TRAIN_SUBSETS:-train-clean-100}"
  ctc_steps="${ctc_steps:-30000}"; codec_steps="${codec_steps:-200000}"
  preset="${preset:-base}"; ctc_preset="${ctc_preset:-base}"
  segment=3.0; batch=8
else
  dev_subsets=dev-clean; test_subsets=test-clean
  case "$corpus_name" in
    minitts) train_subsets="train-clean-100"; codec_steps="${codec_steps:-2000}" ;;
    kathleen) train_subsets=train; dev_subsets=dev; test_subsets=test
      teacher="${teacher:-checkpoints/ctc-minitts}"; init="${init:-checkpoints/codec-minitts}"
      codec_steps="${codec_steps:-2500}" ;;
    *) echo "error: --corpus must be minitts or kathleen, not '$corpus_name'" >&2; exit 2 ;;
  esac
  corpus="datasets/$corpus_name"
  exp="${exp:-exp/$corpus_name}"
  ctc_steps="${ctc_steps:-300}"
  preset="${preset:-small}"; ctc_preset="${ctc_preset:-small}"
  segment=1.0; batch=4
fi
dev_subsets="${dev_subsets:-dev-clean}"; test_subsets="${test_subsets:-test-clean}"
ctc="${teacher:-$exp/ctc}"
# The phone teacher needs alignments; resynthesis is still scored by a CTC recogniser.
[ "$teacher" = phones ] && ctc=checkpoints/ctc-minitts
init_flag=(); [ -n "$init" ] && init_flag=(--init "$init")
[ -d "$corpus" ] || { echo "error: corpus directory '$corpus' not found" >&2; exit 1; }

global=("${verbose[@]+"${verbose[@]}"}")
[ -n "$threads" ] && global+=(--threads "$threads")

build_voxspec

init_stages "$exp"

if run_stage 0 prepare; then
  log "Stage 0 (prepare): $corpus → $exp/data"
  force=()
  for f in "${force_stages[@]+"${force_stages[@]}"}"; do [ "$f" = prepare ] && force=(--force); done
  vx prepare --corpus "$corpus" --out "$exp/data" \
    --train-subsets "$train_subsets" --dev-subsets "$dev_subsets" --test-subsets "$test_subsets" \
    "${force[@]+"${force[@]}"}"
  finish_stage prepare
fi

if [ "$teacher" = phones ]; then
  if run_stage 1 teacher; then
    aligned=$(grep -o '"aligned": *[0-9]*' "$exp/data/summary.json" 2>/dev/null |
      grep -o '[0-9]*$' | awk '{ n += $1 } END { print n + 0 }')
    if [ "$aligned" -eq 0 ]; then
      log "Stage 1 (teacher): phone alignments by voxspec align → $exp/alignments"
      resume=(); compgen -G "$exp/alignments/aligner*/checkpoint-*" >/dev/null && resume=(--resume)
      vx align --data "$exp/data" \
        --out "$exp/alignments" --steps "$align_steps" "${resume[@]+"${resume[@]}"}"
      vx prepare --corpus "$corpus" --out "$exp/data" \
        --train-subsets "$train_subsets" --dev-subsets "$dev_subsets" \
        --test-subsets "$test_subsets" --alignments "$exp/alignments" --force
    else
      log "Stage 1 (teacher): the manifests carry phone alignments ($aligned utterances)"
    fi
    finish_stage teacher
  fi
elif [ -n "$teacher" ]; then
  log "Stage 1 (teacher): using the CTC teacher $teacher"
elif run_stage 1 teacher; then
  log "Stage 1 (teacher): CTC teacher ($ctc_preset), $ctc_steps steps → $exp/ctc"
  resume=$(resume_flag "$exp/ctc")
  vx train ctc --data "$exp/data" --out "$exp/ctc" \
    --preset "$ctc_preset" --steps "$ctc_steps" ${resume:+"$resume"}
  finish_stage teacher
fi

if run_stage 2 features; then
  log "Stage 2 (features): teacher features of every split → $exp/features"
  if [ "$teacher" = phones ]; then
    # Phone codes as wide as the semantic dimension of the codec fine-tuned (if any).
    dim=$(grep -o '"semantic_dimension": *[0-9]*' "${init:-/dev/null}/config.json" 2>/dev/null |
      grep -o "[0-9]*$" || echo 144)
    vx teacher phones --data "$exp/data" \
      --out "$exp/features" --dim "$dim"
  else
    vx teacher extract --teacher "$ctc" \
      --data "$exp/data" --out "$exp/features"
  fi
  finish_stage features
fi

if run_stage 3 codec; then
  log "Stage 3 (codec): SpeechTokenizer ($preset), $codec_steps steps → $exp/codec"
  resume=$(resume_flag "$exp/codec")
  # A fresh run starts from --init (if any); an interrupted one resumes its own checkpoint.
  start=("${init_flag[@]+"${init_flag[@]}"}"); [ -n "$resume" ] && start=("$resume")
  vx codec train --data "$exp/data" \
    --teacher-features "$exp/features" --out "$exp/codec" --preset "$preset" \
    --steps "$codec_steps" --segment "$segment" --batch "$batch" \
    "${adversarial[@]+"${adversarial[@]}"}" "${start[@]+"${start[@]}"}"
  finish_stage codec
fi

if run_stage 4 extract; then
  log "Stage 4 (extract): codes of every split → $exp/tokens"
  vx codec extract --codec "$exp/codec" \
    --data "$exp/data" --out "$exp/tokens"
  finish_stage extract
fi

if run_stage 5 eval; then
  log "Stage 5 (eval): resynthesis quality on the test split, codec speed"
  vx codec eval --codec "$exp/codec" --teacher "$ctc" \
    --data "$exp/data" --split test --out "$exp/codec/eval.json"
  vx bench codec --codec "$exp/codec" --data "$exp/data" \
    --seconds 10 --out "$exp/codec/bench.json"
  finish_stage eval
fi

log "Finished; codec in $exp/codec, tokens in $exp/tokens"
log "Next: recipes/libritts/train_mtp.sh --codec $exp/codec"
