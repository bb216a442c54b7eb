#!/usr/bin/env bash
# Train the SoCodec-style codec and the vocoder behind it, and extract its stream tokens.
#
#   stage 0  prepare   corpus → manifests (train/dev/test.jsonl + summary.json)
#   stage 1  features  hidden states of the CTC teacher (--teacher; minitts: the shipped
#                      checkpoints/ctc-minitts; kathleen: one trained here on the corpus's
#                      training split → <exp>/ctc) for every split → <exp>/features
#   stage 2  socodec   SoCodec (OPQ, nested dropout, global embedding, mel decoder, mel
#                      discriminator) → <exp>/socodec; with --compare-rq also an RQ codec
#                      of the same size → <exp>/socodec-rq
#   stage 3  vocoder   Vocos-style vocoder on the corpus's mel → <exp>/vocoder (skipped when
#                      --vocoder names a trained one, e.g. the shipped checkpoints/vocoder-minitts)
#   stage 4  extract   stream tokens [streams, frames] of every split → <exp>/tokens (with
#                      --phase-shifts N the training split on N token grids)
#   stage 5  eval      test split: MCD, CTC-teacher CER and forced-choice accuracy of speech
#                      decoded from the first b streams, b = 1..S (the paper's Fig. 4) →
#                      <exp>/socodec/eval.json; with --compare-rq the RQ codec too and
#                      <exp>/fig4-{mcd,cer,id}.png
#
# Runs on the bundled corpus datasets/minitts (--corpus kathleen: the bundled real voice) unless
# LIBRITTS_ROOT points at a LibriTTS tree.
# Each finished stage leaves <exp>/.done/<stage>.done and is skipped on a rerun; --force-stage
# reruns one. Training stages resume from their newest checkpoint when rerun after an
# interruption. Everything the recipe does is a `voxspec` subcommand; see `voxspec --help`.
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root
. recipes/common.sh

stage=0
corpus_name=minitts
ctc_steps=1500
stop_stage=100
exp=""
threads=""
steps=""
vocoder_steps=""
preset=""
streams=4
frame_ms=120
quantizer=opq
sub_codebook=""
teacher=""
vocoder=""
compare_rq=0
phase_shifts=1
force_stages=()
verbose=()

usage() {
  sed -n '2,22p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --stage N            first stage to run (default 0)
  --stop-stage N       last stage to run (default: all)
  --corpus NAME        bundled corpus: minitts (default) or kathleen (1.2 h of one real voice)
  --exp DIR            experiment directory (default exp/socodec-<corpus>, or exp/socodec-libritts)
  --threads N          worker threads (default: all cores)
  --steps N            SoCodec steps (default 1500 for minitts, 200000 for LibriTTS)
  --vocoder-steps N    vocoder steps (default 3000 for minitts, 500000 for LibriTTS)
  --preset NAME        SoCodec size: tiny, small (minitts default) or base (the paper's widths)
  --streams N          token streams (default 4)
  --frame-ms MS        token frame shift (default 120; 240 with 8 streams, 40 with 1)
  --quantizer Q        opq (default), pq or rq
  --sub-codebook K     OPQ/PQ sub-codebook size: K² tokens per stream (default: the preset's
                       128; 16 gives 256 tokens, the size train_multistream.sh models)
  --teacher DIR        CTC teacher whose hidden states the codec reads (default: minitts
                       checkpoints/ctc-minitts; kathleen <exp>/ctc, trained in stage 1)
  --ctc-steps N        training steps of that kathleen teacher (default $ctc_steps)
  --vocoder DIR        use this trained vocoder instead of training one in stage 3
  --compare-rq         also train and evaluate an RQ codec (the paper's RQ vs OPQ figure)
  --phase-shifts N     stage 4 also encodes the training split on N-1 shifted token grids
                       (data augmentation for train_multistream.sh; default 1: none)
  --force-stage NAME   rerun a finished stage (repeatable): prepare, features, socodec, ...
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
    --corpus) corpus_name="$2"; shift 2 ;;
    --exp) exp="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --vocoder-steps) vocoder_steps="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    --frame-ms) frame_ms="$2"; shift 2 ;;
    --quantizer) quantizer="$2"; shift 2 ;;
    --sub-codebook) sub_codebook="$2"; shift 2 ;;
    --teacher) teacher="$2"; shift 2 ;;
    --ctc-steps) ctc_steps="$2"; shift 2 ;;
    --vocoder) vocoder="$2"; shift 2 ;;
    --compare-rq) compare_rq=1; shift ;;
    --phase-shifts) phase_shifts="$2"; shift 2 ;;
    --force-stage) force_stages+=("$2"); shift 2 ;;
    -v|-vv|-vvv) verbose+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
  esac
done

if [ -n "${LIBRITTS_ROOT:-}" ]; then
  corpus="$LIBRITTS_ROOT"
  exp="${exp:-exp/socodec-libritts}"
  train_subsets="${TRAIN_SUBSETS:-train-clean-100}"
  steps="${steps:-200000}"; vocoder_steps="${vocoder_steps:-500000}"
  preset="${preset:-base}"; segment=4.8; batch=16
  dev_subsets=dev-clean; test_subsets=test-clean
  teacher="${teacher:-checkpoints/ctc-minitts}"
else
  case "$corpus_name" in
    minitts) train_subsets=train-clean-100; dev_subsets=dev-clean; test_subsets=test-clean
      teacher="${teacher:-checkpoints/ctc-minitts}" ;;
    kathleen) train_subsets=train; dev_subsets=dev; test_subsets=test ;;
    *) echo "error: --corpus must be minitts or kathleen, not '$corpus_name'" >&2; exit 2 ;;
  esac
  corpus="datasets/$corpus_name"
  exp="${exp:-exp/socodec-$corpus_name}"
  teacher="${teacher:-$exp/ctc}"
  steps="${steps:-1500}"; vocoder_steps="${vocoder_steps:-3000}"
  preset="${preset:-small}"; segment=2.4; batch=8
fi
[ -d "$corpus" ] || { echo "error: corpus directory '$corpus' not found" >&2; exit 1; }
train_teacher=0
[ "$teacher" = "$exp/ctc" ] && train_teacher=1
[ "$train_teacher" = 1 ] || [ -f "$teacher/config.json" ] || {
  echo "error: no CTC teacher in '$teacher' (train one with recipes/libritts/train_codec.sh --stop-stage 1)" >&2
  exit 1
}

global=("${verbose[@]+"${verbose[@]}"}")
[ -n "$threads" ] && global+=(--threads "$threads")

build_voxspec

init_stages "$exp"


# train_socodec OUT QUANTIZER
train_socodec() {
  local out="$1" q="$2" resume
  resume=$(resume_flag "$out")
  vx codec train --kind socodec --quantizer "$q" --streams "$streams" --frame-ms "$frame_ms" \
    --data "$exp/data" --teacher-features "$exp/features" --out "$out" --preset "$preset" \
    --steps "$steps" --segment "$segment" --batch "$batch" --lr 5e-4 --adversarial \
    --checkpoint-every 250 --valid-every 500 ${sub_codebook:+--sub-codebook "$sub_codebook"} \
    ${resume:+"$resume"}
}

if run_stage 0 prepare; then
  log "Stage 0 (prepare): $corpus → $exp/data"
  force=()
  for f in "${force_stages[@]+"${force_stages[@]}"}"; do [ "$f" = prepare ] && force=(--force); done
  vx prepare --corpus "$corpus" --out "$exp/data" \
    --train-subsets "$train_subsets" --dev-subsets "$dev_subsets" --test-subsets "$test_subsets" \
    "${force[@]+"${force[@]}"}"
  finish_stage prepare
fi

if [ "$train_teacher" = 1 ] && run_stage 1 teacher; then
  log "Stage 1 (teacher): CTC teacher on $exp/data, $ctc_steps steps → $teacher"
  vx train ctc --data "$exp/data" --out "$teacher" --preset small --steps "$ctc_steps" \
    --checkpoint-every 250 --valid-every 250 $(resume_flag "$teacher")
  finish_stage teacher
fi

if run_stage 1 features; then
  log "Stage 1 (features): hidden states of $teacher for every split → $exp/features"
  vx teacher extract --teacher "$teacher" --data "$exp/data" --out "$exp/features"
  finish_stage features
fi

if run_stage 2 socodec; then
  log "Stage 2 (socodec): $quantizer, $streams streams at $frame_ms ms ($preset), $steps steps → $exp/socodec"
  train_socodec "$exp/socodec" "$quantizer"
  if [ "$compare_rq" = 1 ]; then
    log "Stage 2 (socodec): RQ of the same size for the comparison → $exp/socodec-rq"
    train_socodec "$exp/socodec-rq" rq
  fi
  finish_stage socodec
fi

if [ -z "$vocoder" ]; then
  vocoder="$exp/vocoder"
  if run_stage 3 vocoder; then
    log "Stage 3 (vocoder): Vocos (small: hop 160, the codec's 10 ms mel), $vocoder_steps steps → $vocoder"
    resume=$(resume_flag "$vocoder")
    vx vocoder train --data "$exp/data" --out "$vocoder" --preset small \
      --steps "$vocoder_steps" ${resume:+"$resume"}
    finish_stage vocoder
  fi
else
  log "Stage 3 (vocoder): using $vocoder"
fi

if run_stage 4 extract; then
  log "Stage 4 (extract): stream tokens of every split → $exp/tokens"
  vx codec extract --codec "$exp/socodec" --teacher-features "$exp/features" \
    --data "$exp/data" --out "$exp/tokens" --phase-shifts "$phase_shifts"
  finish_stage extract
fi

if run_stage 5 eval; then
  log "Stage 5 (eval): speech from the first b streams on the test split"
  vx codec eval --codec "$exp/socodec" --teacher "$teacher" --vocoder "$vocoder" \
    --data "$exp/data" --split test --out "$exp/socodec/eval.json"
  reports=(--report "$exp/socodec/eval.json")
  if [ "$compare_rq" = 1 ]; then
    vx codec eval --codec "$exp/socodec-rq" --teacher "$teacher" --vocoder "$vocoder" \
      --data "$exp/data" --split test --out "$exp/socodec-rq/eval.json"
    reports+=(--report "$exp/socodec-rq/eval.json")
  fi
  vx codec plot-streams "${reports[@]}" --out "$exp/fig4"
  finish_stage eval
fi

log "Finished; codec in $exp/socodec, vocoder in $vocoder, tokens in $exp/tokens"
