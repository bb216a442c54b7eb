#!/usr/bin/env bash
# Train and benchmark the delayed multi-stream LM (SoCodec §4) end to end.
#
#   stage 0  codec      the SoCodec-style codec's data, teacher features, codec and tokens:
#                       recipes/libritts/train_socodec.sh (OPQ, 4 streams at 120 ms, 256 tokens
#                       per stream; minitts: the shipped vocoder, kathleen: --vocoder or one
#                       trained there) → <exp>/socodec/{data,features,socodec,tokens}; with --codec DIR only its data, features and tokens. The
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
# Runs on the bundled corpus datasets/minitts (--corpus kathleen: the bundled real voice) unless
# LIBRITTS_ROOT points at a LibriTTS tree.
# Each finished stage leaves <exp>/.done/<stage>.done and is skipped on a rerun; --force-stage
# reruns one. Everything the recipe does is a `voxspec` subcommand; see `voxspec --help`.
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root
. recipes/common.sh

stage=0
corpus_name=minitts
vocoder=""
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
baseline_exp=""
bench_utterances=60
force_stages=()
verbose=()

usage() {
  sed -n '2,29p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --stage N            first stage to run (default 0)
  --stop-stage N       last stage to run (default: all)
  --corpus NAME        bundled corpus: minitts (default) or kathleen (1.2 h of one real voice)
  --exp DIR            experiment directory (default exp/multistream-<corpus>, or
                       exp/multistream-libritts)
  --threads N          worker threads (default: all cores)
  --codec DIR          a trained SoCodec-style codec to use instead of training one
  --codec-steps N      SoCodec training steps (default: train_socodec.sh's)
  --vocoder DIR        vocoder behind the codec (default: minitts checkpoints/vocoder-minitts;
                       kathleen: train_socodec.sh trains one)
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
                       exp/<corpus>; skipped when it has no model)
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
    --corpus) corpus_name="$2"; shift 2 ;;
    --exp) exp="$2"; shift 2 ;;
    --vocoder) vocoder="$2"; shift 2 ;;
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
  baseline_exp="${baseline_exp:-exp/libritts}"; vocoder="${vocoder:-checkpoints/vocoder-minitts}"
  steps="${steps:-100000}"; preset=base; batch=32
else
  case "$corpus_name" in
    minitts) vocoder="${vocoder:-checkpoints/vocoder-minitts}" ;;
    kathleen) ;;
    *) echo "error: --corpus must be minitts or kathleen, not '$corpus_name'" >&2; exit 2 ;;
  esac
  exp="${exp:-exp/multistream-$corpus_name}"
  baseline_exp="${baseline_exp:-exp/$corpus_name}"
  steps="${steps:-1500}"; preset=small; batch=16
fi

global=("${verbose[@]}")
[ -n "$threads" ] && global+=(--threads "$threads")

build_voxspec

init_stages "$exp"

so="$exp/socodec"
data="$so/data"
tokens="$so/tokens"
codec_dir="${codec:-$so/socodec}"
# kathleen without --vocoder: the one train_socodec.sh trains in stage 0.
vocoder_given="$vocoder"
vocoder="${vocoder:-$so/vocoder}"

if run_stage 0 codec; then
  socodec_args=(--exp "$so" --corpus "$corpus_name" --sub-codebook 16
    --frame-ms "$frame_ms" --streams "$streams" --phase-shifts "$phase_shifts"
    "${verbose[@]+"${verbose[@]}"}")
  [ -n "$threads" ] && socodec_args+=(--threads "$threads")
  [ -n "$vocoder_given" ] && socodec_args+=(--vocoder "$vocoder_given")
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
  finish_stage codec
fi

if run_stage 1 tokenizer; then
  log "Stage 1 (tokenizer): phonemes → $data/tokenizer.json"
  vx tokenizer train --manifest "$data/train.jsonl" --out "$data/tokenizer.json" \
    --kind phoneme --force
  finish_stage tokenizer
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
  finish_stage lm
fi

if [ "$ablation" = 1 ] && run_stage 3 ablation; then
  log "Stage 3 (ablation): the same LM with d = $other → $exp/lm-d$other"
  train_lm "$exp/lm-d$other" "$other"
  finish_stage ablation
fi

if [ "$mtp_heads" -gt 1 ] && run_stage 4 mtp; then
  log "Stage 4 (mtp): $mtp_heads heads on the frozen $exp/lm, $mtp_steps steps → $exp/lm-mtp"
  vx train multistream --data "$data" --tokens "$tokens" --codec "$codec_dir" \
    --out "$exp/lm-mtp" --base "$exp/lm" --mtp-heads "$mtp_heads" --steps "$mtp_steps" \
    --batch "$batch" --valid-every 100 --checkpoint-every 100 $(resume_flag "$exp/lm-mtp")
  finish_stage mtp
fi

if run_stage 5 draft; then
  log "Stage 5 (draft): layer 0 of $exp/lm, its layer and heads trained → $exp/draft"
  vx train multistream --data "$data" --tokens "$tokens" --codec "$codec_dir" \
    --out "$exp/draft" --target "$exp/lm" --layers 0 --steps "$steps" --batch "$batch" \
    --valid-every 100 --checkpoint-every 100 $(resume_flag "$exp/draft")
  finish_stage draft
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
      --vocoder "$vocoder" \
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
  finish_stage bench
fi
log "Done: $exp"
