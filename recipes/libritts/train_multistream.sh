#!/usr/bin/env bash
# Train and benchmark the delayed multi-stream LM (SoCodec §4) end to end.
#
#   stage 0  codec      the SoCodec-style codec's data, teacher features, codec and tokens:
#                       recipes/libritts/train_socodec.sh (OPQ, 4 streams at 120 ms, 256 tokens
#                       per stream, the shipped vocoder) → <exp>/socodec/{data,features,socodec,
#                       tokens}; with --codec DIR only its data, features and tokens. The
#                       training split is encoded on every 20 ms shift of the token grid
#                       (--phase-shifts), six times the training frames
#   stage 1  tokenizer  phonemes (CMUdict + letter-to-sound) → <exp>/socodec/data/tokenizer.json
#   stage 2  lm         the multi-stream LM, delay d = --delay (default 0: on minitts the LM
#                       without delay is the one that speaks, 70 % ID against 11.7 % for d = 1;
#                       aligned: step track + duration predictor, when the corpus has phone
#                       alignments) → <exp>/lm
#   stage 3  ablation   the other delay (d = 1 for d = 0, else 0; --no-ablation skips it)
#                       → <exp>/lm-d<other>
#   stage 4  mtp        --mtp-heads multi-token heads on the frozen LM of stage 2, one
#                       transition matrix per stream → <exp>/lm-mtp
#   stage 5  draft      a draft of the LM's first layer for speculative decoding → <exp>/draft
#   stage 6  bench      frame AR, speculative (exact, SSD, per-stream PCG) and MTP (independent,
#                       Viterbi) decoders on the test split: LM RTF, ms per frame, frames per
#                       forward, acceptance, CER, forced-choice accuracy, with the main job's
#                       single-stream AR (--baseline-exp, run recipes/libritts/train_mtp.sh
#                       first) in the same run → <exp>/bench; the MTP model → <exp>/bench-mtp;
#                       the ablation → <exp>/bench-d<other>
#
# Runs on the bundled corpus datasets/minitts unless LIBRITTS_ROOT points at a LibriTTS tree.
# Each finished stage leaves <exp>/.done/<stage>.done and is skipped on a rerun; --force-stage
# reruns one. Everything the recipe does is a `voxspec` subcommand; see `voxspec --help`.
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root

stage=0
stop_stage=100
exp=""
threads=""
codec=""
steps=""
codec_steps=""
code_dropout=0.7
frame_ms=120
streams=4
phase_shifts=""
dropout=0.3
mtp_heads=4
mtp_steps=200
ablation=1
delay=0
baseline_exp="exp/minitts"
bench_utterances=60
force_stages=()
verbose=()

usage() {
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --stage N            first stage to run (default 0)
  --stop-stage N       last stage to run (default: all)
  --exp DIR            experiment directory (default exp/multistream-minitts, or
                       exp/multistream-libritts)
  --threads N          worker threads (default: all cores)
  --codec DIR          a trained SoCodec-style codec to use instead of training one
  --codec-steps N      SoCodec training steps (default: train_socodec.sh's)
  --frame-ms MS        the codec's frame shift (default $frame_ms; the paper's Table 1 also
                       has 40 with --streams 1, and 240 with --streams 8)
  --streams N          token streams of the codec (default $streams)
  --phase-shifts N     token grids the training split is encoded on (default frame-ms / 20:
                       every 20 ms offset of a frame, six at 120 ms; 1: the one grid)
  --steps N            LM training steps (default 1500 for minitts: on six token grids its
                       dev loss still falls there; 600 suits one grid; 100000 for LibriTTS)
  --dropout P          LM dropout (default $dropout)
  --code-dropout P     input codes replaced by the special token in training (default
                       $code_dropout)
  --delay D            delay step of the main LM (default $delay; the ablation trains the other)
  --no-ablation        skip the ablation model
  --mtp-heads N        prediction heads of the MTP model (default $mtp_heads; 1 skips stage 4)
  --mtp-steps N        training steps of its heads (default $mtp_steps: their dev loss is
                       lowest there on minitts)
  --baseline-exp DIR   train_mtp.sh experiment whose AR model runs beside (default
                       $baseline_exp; skipped when it has no model)
  --bench-utterances N test sentences in the benchmark (default $bench_utterances)
  --force-stage NAME   rerun a finished stage (repeatable): codec, tokenizer, lm, ...
  -v                   more logging from voxspec
  -h, --help           this help
Environment: LIBRITTS_ROOT=/path/to/LibriTTS selects the real corpus.
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage="$2"; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage="$2"; shift 2 ;;
    --exp) exp="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --codec) codec="$2"; shift 2 ;;
    --codec-steps) codec_steps="$2"; shift 2 ;;
    --frame-ms) frame_ms="$2"; shift 2 ;;
    --streams) streams="$2"; shift 2 ;;
    --phase-shifts) phase_shifts="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --dropout) dropout="$2"; shift 2 ;;
    --code-dropout) code_dropout="$2"; shift 2 ;;
    --no-ablation) ablation=0; shift ;;
    --delay) delay="$2"; shift 2 ;;
    --mtp-heads) mtp_heads="$2"; shift 2 ;;
    --mtp-steps) mtp_steps="$2"; shift 2 ;;
    --baseline-exp) baseline_exp="$2"; shift 2 ;;
    --bench-utterances) bench_utterances="$2"; shift 2 ;;
    --force-stage) force_stages+=("$2"); shift 2 ;;
    -v|-vv|-vvv) verbose+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
  esac
done

log() { echo "[$(date +%H:%M:%S)] $*"; }

case "$frame_ms" in
  ''|*[!0-9]*|0) echo "error: --frame-ms $frame_ms: expected a positive multiple of 20" >&2; exit 2 ;;
esac
[ $((frame_ms % 20)) -eq 0 ] || {
  echo "error: --frame-ms $frame_ms: expected a multiple of 20 (the teacher's frame)" >&2; exit 2; }
phase_shifts="${phase_shifts:-$((frame_ms / 20))}"
# One stream has nothing to delay: d = 0 and d = 1 are the same model.
[ "$streams" = 1 ] && ablation=0

if [ -n "${LIBRITTS_ROOT:-}" ]; then
  exp="${exp:-exp/multistream-libritts}"
  steps="${steps:-100000}"; preset=base; batch=32
else
  exp="${exp:-exp/multistream-minitts}"
  steps="${steps:-1500}"; preset=small; batch=16
fi

global=("${verbose[@]}")
[ -n "$threads" ] && global+=(--threads "$threads")

log "Building voxspec (release)"
cargo build --release --quiet --bin voxspec ${CARGO_FEATURES:+--features "$CARGO_FEATURES"}
voxspec="${CARGO_TARGET_DIR:-target}/release/voxspec"
vx() { "$voxspec" "${global[@]}" "$@"; }

done_dir="$exp/.done"
mkdir -p "$done_dir"

run_stage() {
  local n="$1" name="$2"
  [ "$n" -ge "$stage" ] && [ "$n" -le "$stop_stage" ] || return 1
  for f in "${force_stages[@]+"${force_stages[@]}"}"; do
    [ "$f" = "$name" ] && { rm -f "$done_dir/$name.done"; return 0; }
  done
  if [ -f "$done_dir/$name.done" ]; then
    log "Stage $n ($name): done before, skipping ($done_dir/$name.done)"
    return 1
  fi
  return 0
}

resume_flag() { compgen -G "$1/checkpoint-*" >/dev/null && echo --resume || true; }

so="$exp/socodec"
data="$so/data"
tokens="$so/tokens"
codec_dir="${codec:-$so/socodec}"

if run_stage 0 codec; then
  socodec_args=(--exp "$so" --vocoder checkpoints/vocoder-minitts --sub-codebook 16
    --frame-ms "$frame_ms" --streams "$streams" --phase-shifts "$phase_shifts"
    "${verbose[@]+"${verbose[@]}"}")
  [ -n "$threads" ] && socodec_args+=(--threads "$threads")
  [ -n "$codec_steps" ] && socodec_args+=(--steps "$codec_steps")
  if [ -n "$codec" ]; then
    log "Stage 0 (codec): data and teacher features → $so; tokens of $codec → $tokens"
    recipes/libritts/train_socodec.sh "${socodec_args[@]}" --stop-stage 1
    vx codec extract --codec "$codec" --teacher-features "$so/features" --data "$data" \
      --out "$tokens" --phase-shifts "$phase_shifts"
  else
    log "Stage 0 (codec): recipes/libritts/train_socodec.sh → $so"
    recipes/libritts/train_socodec.sh "${socodec_args[@]}" --stop-stage 4
  fi
  touch "$done_dir/codec.done"
fi

if run_stage 1 tokenizer; then
  log "Stage 1 (tokenizer): phonemes → $data/tokenizer.json"
  vx tokenizer train --manifest "$data/train.jsonl" --out "$data/tokenizer.json" \
    --kind phoneme --force
  touch "$done_dir/tokenizer.done"
fi

# train_lm OUT DELAY
train_lm() {
  local out="$1" delay="$2"
  vx train multistream --data "$data" --tokens "$tokens" --codec "$codec_dir" --out "$out" \
    --preset "$preset" --delay "$delay" --steps "$steps" --batch "$batch" \
    --dropout "$dropout" --code-dropout "$code_dropout" --valid-every 100 \
    --checkpoint-every 100 $(resume_flag "$out")
}

other=0
[ "$delay" = 0 ] && other=1

if run_stage 2 lm; then
  log "Stage 2 (lm): multi-stream LM, d = $delay, $steps steps → $exp/lm"
  train_lm "$exp/lm" "$delay"
  touch "$done_dir/lm.done"
fi

if [ "$ablation" = 1 ] && run_stage 3 ablation; then
  log "Stage 3 (ablation): the same LM with d = $other → $exp/lm-d$other"
  train_lm "$exp/lm-d$other" "$other"
  touch "$done_dir/ablation.done"
fi

if [ "$mtp_heads" -gt 1 ] && run_stage 4 mtp; then
  log "Stage 4 (mtp): $mtp_heads heads on the frozen $exp/lm, $mtp_steps steps → $exp/lm-mtp"
  vx train multistream --data "$data" --tokens "$tokens" --codec "$codec_dir" \
    --out "$exp/lm-mtp" --base "$exp/lm" --mtp-heads "$mtp_heads" --steps "$mtp_steps" \
    --batch "$batch" --valid-every 100 --checkpoint-every 100 $(resume_flag "$exp/lm-mtp")
  touch "$done_dir/mtp.done"
fi

if run_stage 5 draft; then
  log "Stage 5 (draft): layer 0 of $exp/lm, its layer and heads trained → $exp/draft"
  vx train multistream --data "$data" --tokens "$tokens" --codec "$codec_dir" \
    --out "$exp/draft" --target "$exp/lm" --layers 0 --steps "$steps" --batch "$batch" \
    --valid-every 100 --checkpoint-every 100 $(resume_flag "$exp/draft")
  touch "$done_dir/draft.done"
fi

if run_stage 6 bench; then
  reference=$(head -n 1 "$data/train.jsonl" | sed 's/.*"path":"\([^"]*\)".*/\1/')
  baseline=()
  if [ -f "$baseline_exp/ar/config.json" ]; then
    baseline=(--baseline-exp "$baseline_exp")
  else
    log "no single-stream AR model in $baseline_exp/ar: its row is left out"
  fi
  bench() { # MODEL OUT [args...]
    local model="$1" out="$2"; shift 2
    vx bench multistream --model "$model" --reference "$reference" --data "$data" \
      --split test --max-utterances "$bench_utterances" --temperature 0 --out "$out" "$@"
  }
  log "Stage 6 (bench): test split, voice of $reference → $exp/bench"
  draft_args=()
  [ -f "$exp/draft/config.json" ] && draft_args=(--draft "$exp/draft" --pcg)
  bench "$exp/lm" "$exp/bench" "${draft_args[@]+"${draft_args[@]}"}" \
    "${baseline[@]+"${baseline[@]}"}"
  # The MTP model's own head is the frozen LM's: its AR row is the LM's.
  if [ -f "$exp/lm-mtp/config.json" ]; then
    bench "$exp/lm-mtp" "$exp/bench-mtp" --heads 2,"$mtp_heads"
  fi
  if [ -f "$exp/lm-d$other/config.json" ]; then
    bench "$exp/lm-d$other" "$exp/bench-d$other"
  fi
  touch "$done_dir/bench.done"
fi
log "Done: $exp"
