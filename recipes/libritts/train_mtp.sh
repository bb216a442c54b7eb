#!/usr/bin/env bash
# The main job: train an AR model with multi-token-prediction heads on codec tokens.
#
#   stage 0  prepare      corpus → manifests (train/dev/test.jsonl + summary.json); a corpus
#                         without phone alignments is aligned by `voxspec align` (an aligner
#                         trained on it) and prepared again with them, unless --alignment off
#   stage 1  tokenizer    phoneme tokenizer (CMUdict + letter-to-sound; --tokenizer bpe for the
#                         BPE baseline trained on the train transcripts)
#   stage 2  extract      codec codes for every split (the shipped codec of the corpus, or
#                         --codec DIR), linked as <exp>/codec for synthesize and serve
#   stage 3  transitions  stream-0 bigram statistics for Viterbi decoding
#   stage 4  train_ar     AR model with MTP heads (--heads, --ar-steps); aligned (phone track +
#                         duration predictor) when the manifests carry phone alignments
#   stage 5  train_nar    NAR model for RVQ layers 2..N (--nar-steps); aligned like the AR model
#   stage 6  bench        decoders side by side on test sentences: TPT, speedup over AR, tokens
#                         per forward, forced-choice accuracy and CER (CTC teacher), NLL, and on
#                         the native engine AR on Burn beside it (--bench-engine)
#                         → <exp>/bench (JSON, table, PNGs)
#   stage 7  export       self-contained model card of the AR model (+ transitions)
#
# Runs on the bundled real voice datasets/kathleen (--corpus minitts: the small flite corpus the
# CI smoke run uses) unless LIBRITTS_ROOT points at a LibriTTS tree.
# Each finished stage leaves <exp>/.done/<stage>.done and is skipped on a rerun; --force-stage
# reruns one. Everything the recipe does is a `voxspec` subcommand; see `voxspec --help`.
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root
. recipes/common.sh

stage=0
stop_stage=100
exp=""
corpus_name=kathleen
vocab_size=""
tokenizer_kind=phoneme
alignments=""
alignment=auto
align_steps=""
threads=""
device=""
codec=""
mel_decoder=""
mel_vocoder=""
heads=8
matmul=auto
ar_steps=""
nar_steps=""
batch=""
preset=""
teacher=""
bench_utterances=""
bench_heads=""
bench_engine=""
force_stages=()
verbose=()

usage() {
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --stage N            first stage to run (default 0)
  --stop-stage N       last stage to run (default: all)
  --corpus NAME        bundled corpus: kathleen (default; 1.2 h of one real woman's voice,
                       aligned by voxspec align) or minitts (21 minutes of flite voices, with
                       flite's own phone timings); LIBRITTS_ROOT overrides it
  --exp DIR            experiment directory (default exp/<corpus>, or exp/libritts with LIBRITTS_ROOT)
  --tokenizer KIND     phoneme (default) or bpe (the unaligned baseline)
  --vocab-size N       BPE vocabulary size (default 256 for minitts, 512 for LibriTTS)
  --alignments DIR     phone alignments as Montreal-Forced-Aligner TextGrids mirroring the corpus
                       (<DIR>/<speaker>/<chapter>/<utt>.TextGrid); minitts ships its own next to
                       the audio, made from flite's phone timings (datasets/align_minitts.sh)
  --alignment MODE     AR model aligned: auto (default: with the phoneme tokenizer; a corpus
                       without alignments is aligned first by voxspec align), on, off (the plain
                       model, no alignment made or used)
  --align-steps N      Viterbi-training steps of voxspec align after its 200-step flat start
                       (default 800)
  --threads N          worker threads (default: all cores)
  --device SPEC        cpu (default), wgpu, wgpu:N, cuda, cuda:N, or a list (wgpu:0,wgpu:1) for
                       data-parallel AR/NAR training; wgpu needs CARGO_FEATURES=gpu, cuda
                       CARGO_FEATURES=cuda
  --codec DIR          codec model directory for stage 2 (default: the shipped codec of the
                       corpus, checkpoints/kathleen/codec or checkpoints/codec-minitts;
                       stages 2-5 need codes)
  --mel-decoder DIR    codes → log-mel decoder linked as <exp>/mel_decoder, which synthesize,
                       serve and the bench then render the codes with in place of the codec's
                       decoder (default for kathleen: checkpoints/kathleen/mel_decoder; none for
                       minitts; 'none': the codec's decoder)
  --mel-vocoder DIR    vocoder of the mel decoder's log-mel, linked as <exp>/vocoder (default for
                       kathleen: checkpoints/kathleen/vocoder; 'none': Griffin-Lim)
  --heads N            MTP prediction heads (default 8)
  --matmul P           precision of the AR/NAR linear layers' products: auto (default: bf16
                       operands with f32 sums where the CPU has AMX-BF16 tiles, f32 elsewhere),
                       f32, or bf16 (also on CPUs with AVX512-BF16 alone)
  --ar-steps N         AR training steps (default 800 for kathleen, 600 for minitts, 100000
                       for LibriTTS)
  --nar-steps N        NAR training steps (default 400 for the bundled corpora, 100000 for
                       LibriTTS)
  --batch N            utterances per AR/NAR training batch (default 8 for minitts, 16 for
                       LibriTTS; at most 8192 padded positions either way)
  --teacher DIR        CTC teacher scoring the bench's CER (default: checkpoints/ctc-minitts
                       when it exists; without one the bench has no CER column)
  --bench-utterances N test sentences the bench synthesises with every decoder (default 60: all
                       of minitts's test split, 60 of kathleen's 100; forced choice is among
                       every test transcript)
  --bench-heads LIST   head counts the bench compares (default 1,2,4,8 up to --heads)
  --bench-engine E     engine of the bench's decoders: native-bf16 (default on the CPU: the
                       native engine with bf16 weights), native (f32), native-int8, or burn
                       (default with a GPU --device); with a native engine the bench also runs AR
                       on Burn on every sentence, so its table shows the engine's speed-up over
                       Burn measured in the same run
  --preset NAME        model size: tiny, small (minitts default) or base (LibriTTS default)
  --force-stage NAME   rerun a finished stage (repeatable): prepare, tokenizer, ...
  -v                   more logging from voxspec
  -h, --help           this help
Environment: LIBRITTS_ROOT=/path/to/LibriTTS selects the real corpus (train-clean-100,
dev-clean, test-clean; set TRAIN_SUBSETS=train-clean-100,train-clean-360 for more) and the
paper-scale models (--preset base: 12 layers, width 1024). On GPUs (CARGO_FEATURES is passed
to the recipe's own cargo build):
  LIBRITTS_ROOT=/data/LibriTTS CARGO_FEATURES=gpu $0 --device wgpu:0 --codec DIR
with DIR a LibriTTS codec from recipes/libritts/train_codec.sh.
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --stage) stage="$2"; shift 2 ;;
    --stop-stage|--stop_stage) stop_stage="$2"; shift 2 ;;
    --exp) exp="$2"; shift 2 ;;
    --corpus) corpus_name="$2"; shift 2 ;;
    --align-steps) align_steps="$2"; shift 2 ;;
    --vocab-size) vocab_size="$2"; shift 2 ;;
    --tokenizer) tokenizer_kind="$2"; shift 2 ;;
    --alignments) alignments="$2"; shift 2 ;;
    --alignment) alignment="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --device) device="$2"; shift 2 ;;
    --codec) codec="$2"; shift 2 ;;
    --mel-decoder) mel_decoder="$2"; shift 2 ;;
    --mel-vocoder) mel_vocoder="$2"; shift 2 ;;
    --heads) heads="$2"; shift 2 ;;
    --matmul) matmul="$2"; shift 2 ;;
    --ar-steps) ar_steps="$2"; shift 2 ;;
    --nar-steps) nar_steps="$2"; shift 2 ;;
    --batch) batch="$2"; shift 2 ;;
    --preset) preset="$2"; shift 2 ;;
    --teacher) teacher="$2"; shift 2 ;;
    --bench-utterances) bench_utterances="$2"; shift 2 ;;
    --bench-heads) bench_heads="$2"; shift 2 ;;
    --bench-engine) bench_engine="$2"; shift 2 ;;
    --force-stage) force_stages+=("$2"); shift 2 ;;
    -v|-vv|-vvv) verbose+=("$1"); shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "error: unknown option '$1' (see $0 --help)" >&2; exit 2 ;;
  esac
done

dev_subsets=dev-clean
test_subsets=test-clean
if [ -n "${LIBRITTS_ROOT:-}" ]; then
  corpus="$LIBRITTS_ROOT"
  exp="${exp:-exp/libritts}"
  vocab_size="${vocab_size:-512}"
  train_subsets="${TRAIN_SUBSETS:-train-clean-100}"
  ar_steps="${ar_steps:-100000}"; nar_steps="${nar_steps:-100000}"; preset="${preset:-base}"
  batch="${batch:-16}"
else
  case "$corpus_name" in
    minitts) train_subsets="train-clean-100"; codec="${codec:-checkpoints/codec-minitts}" ;;
    kathleen) train_subsets=train; dev_subsets=dev; test_subsets=test
      codec="${codec:-checkpoints/kathleen/codec}"; ar_steps="${ar_steps:-800}"
      mel_decoder="${mel_decoder:-checkpoints/kathleen/mel_decoder}"
      mel_vocoder="${mel_vocoder:-checkpoints/kathleen/vocoder}" ;;
    *) echo "error: --corpus must be minitts or kathleen, not '$corpus_name'" >&2; exit 2 ;;
  esac
  corpus="datasets/$corpus_name"
  exp="${exp:-exp/$corpus_name}"
  vocab_size="${vocab_size:-256}"
  ar_steps="${ar_steps:-600}"; nar_steps="${nar_steps:-400}"; preset="${preset:-small}"
  # Batches of 16 took 1.5 s per AR step on 2 cores: 15 minutes for the AR model alone.
  batch="${batch:-8}"
fi
align_steps="${align_steps:-800}"
codec="${codec:-checkpoints/codec-minitts}"
teacher="${teacher:-checkpoints/ctc-minitts}"
bench_utterances="${bench_utterances:-60}"
if [ -z "$bench_heads" ]; then
  bench_heads=$(for k in 1 2 4 8; do [ "$k" -le "$heads" ] && echo "$k"; done | paste -sd, -)
fi
if [ -z "$bench_engine" ]; then
  case "${device:-cpu}" in cpu) bench_engine=native-bf16 ;; *) bench_engine=burn ;; esac
fi
bench_baseline=()
case "$bench_engine" in native*) bench_baseline=(--baseline-engine burn) ;; esac
[ -d "$corpus" ] || { echo "error: corpus directory '$corpus' not found" >&2; exit 1; }

global=("${verbose[@]}")
[ -n "$threads" ] && global+=(--threads "$threads")
[ -n "$device" ] && global+=(--device "$device")

build_voxspec

init_stages "$exp"

missing=()

if run_stage 0 prepare; then
  log "Stage 0 (prepare): $corpus → $exp/data"
  force=()
  for f in "${force_stages[@]+"${force_stages[@]}"}"; do [ "$f" = prepare ] && force=(--force); done
  align=(); [ -n "$alignments" ] && align=(--alignments "$alignments")
  vx prepare --corpus "$corpus" --out "$exp/data" \
    --train-subsets "$train_subsets" --dev-subsets "$dev_subsets" --test-subsets "$test_subsets" \
    "${align[@]+"${align[@]}"}" "${force[@]+"${force[@]}"}"
  finish_stage prepare
fi

# Utterances of the manifests that carry a phone alignment (summary.json's "aligned" counts).
aligned_count() {
  grep -o '"aligned": *[0-9]*' "$exp/data/summary.json" 2>/dev/null | grep -o '[0-9]*$' |
    awk '{ n += $1 } END { print n + 0 }'
}

if [ "$tokenizer_kind" = phoneme ] && [ "$alignment" != off ] && run_stage 0 align; then
  if [ "$(aligned_count)" -eq 0 ]; then
    log "Stage 0 (align): no phone alignments in $corpus: voxspec align → $exp/alignments"
    resume=(); compgen -G "$exp/alignments/aligner*/checkpoint-*" >/dev/null && resume=(--resume)
    vx align --data "$exp/data" --out "$exp/alignments" \
      --steps "$align_steps" "${resume[@]+"${resume[@]}"}"
    vx prepare --corpus "$corpus" --out "$exp/data" \
      --train-subsets "$train_subsets" --dev-subsets "$dev_subsets" --test-subsets "$test_subsets" \
      --alignments "$exp/alignments" --force
  else
    log "Stage 0 (align): the manifests carry alignments ($(aligned_count) utterances)"
  fi
  finish_stage align
fi

if run_stage 1 tokenizer; then
  case "$tokenizer_kind" in
    phoneme)
      log "Stage 1 (tokenizer): phonemes (CMUdict + letter-to-sound) → $exp/data/tokenizer.json"
      vx tokenizer train --manifest "$exp/data/train.jsonl" \
        --out "$exp/data/tokenizer.json" --kind phoneme --force ;;
    bpe)
      log "Stage 1 (tokenizer): BPE, $vocab_size tokens → $exp/data/tokenizer.json"
      vx tokenizer train --manifest "$exp/data/train.jsonl" \
        --out "$exp/data/tokenizer.json" --kind bpe --vocab-size "$vocab_size" --force ;;
    *) echo "error: --tokenizer must be phoneme or bpe, not '$tokenizer_kind'" >&2; exit 2 ;;
  esac
  finish_stage tokenizer
fi

tokens="$exp/tokens"
if run_stage 2 extract; then
  if [ -f "$codec/config.json" ]; then
    log "Stage 2 (extract): codes of every split with $codec → $tokens"
    vx codec extract --codec "$codec" --data "$exp/data" --out "$tokens"
    # synthesize, serve and bench read the codec of an experiment from <exp>/codec.
    if [ "$(realpath "$codec")" != "$(realpath -m "$exp/codec")" ]; then
      if [ -L "$exp/codec" ] || [ ! -e "$exp/codec" ]; then
        ln -sfn "$(realpath "$codec")" "$exp/codec"
      else
        log "warning: $exp/codec is another codec than $codec; pass --codec $codec to synthesize"
      fi
    fi
    if [ -n "$mel_decoder" ] && [ "$mel_decoder" != none ] && [ -f "$mel_decoder/config.json" ]; then
      if [ -L "$exp/mel_decoder" ] || [ ! -e "$exp/mel_decoder" ]; then
        ln -sfn "$(realpath "$mel_decoder")" "$exp/mel_decoder"
      fi
    elif [ -L "$exp/mel_decoder" ]; then
      rm "$exp/mel_decoder"
    fi
    if [ -n "$mel_vocoder" ] && [ "$mel_vocoder" != none ] && [ -f "$mel_vocoder/config.json" ]; then
      if [ -L "$exp/vocoder" ] || [ ! -e "$exp/vocoder" ]; then
        ln -sfn "$(realpath "$mel_vocoder")" "$exp/vocoder"
      fi
    elif [ -L "$exp/vocoder" ]; then
      rm "$exp/vocoder"
    fi
    finish_stage extract
  else
    missing+=("2:extract (no codec model at $codec: train one with recipes/libritts/train_codec.sh or pass --codec)")
  fi
fi

have_tokens() { compgen -G "$tokens/train-*.safetensors" >/dev/null; }

if run_stage 3 transitions; then
  if have_tokens; then
    log "Stage 3 (transitions): stream-0 Q → $exp/transitions.safetensors"
    vx stats transitions --tokens "$tokens" --out "$exp/transitions.safetensors"
    finish_stage transitions
  else
    missing+=("3:transitions (no codes in $tokens)")
  fi
fi

lm_args=(--data "$exp/data" --tokens "$tokens" --preset "$preset" --batch "$batch" --matmul "$matmul")
if run_stage 4 train_ar; then
  if have_tokens; then
    log "Stage 4 (train_ar): AR model with $heads heads, $ar_steps steps → $exp/ar"
    resume=(); [ -d "$exp/ar" ] && compgen -G "$exp/ar/checkpoint-*" >/dev/null && resume=(--resume)
    vx train mtp "${lm_args[@]}" --heads "$heads" --steps "$ar_steps" \
      --alignment "$alignment" --out "$exp/ar" "${resume[@]+"${resume[@]}"}"
    finish_stage train_ar
  else
    missing+=("4:train_ar (no codes in $tokens)")
  fi
fi

if run_stage 5 train_nar; then
  if have_tokens; then
    log "Stage 5 (train_nar): NAR model, $nar_steps steps → $exp/nar"
    resume=(); [ -d "$exp/nar" ] && compgen -G "$exp/nar/checkpoint-*" >/dev/null && resume=(--resume)
    vx train nar "${lm_args[@]}" --steps "$nar_steps" \
      --alignment "$alignment" --out "$exp/nar" "${resume[@]+"${resume[@]}"}"
    finish_stage train_nar
  else
    missing+=("5:train_nar (no codes in $tokens)")
  fi
fi

if run_stage 6 bench; then
  if [ -f "$exp/ar/model.safetensors" ] && [ -f "$exp/nar/model.safetensors" ] && [ -f "$codec/config.json" ]; then
    log "Stage 6 (bench): every decoder on $bench_utterances test sentences ($bench_engine) → $exp/bench"
    cer=(--no-cer); [ -f "$teacher/config.json" ] && cer=(--teacher "$teacher")
    vx bench decode --exp "$exp" --codec "$codec" --data "$exp/data" \
      --max-utterances "$bench_utterances" --heads "$bench_heads" --top-k 3 \
      --self-spec --gammas 3 --betas 0,0.4 --group-sizes 4.5 "${cer[@]}" --out "$exp/bench" \
      --engine "$bench_engine" "${bench_baseline[@]+"${bench_baseline[@]}"}"
    finish_stage bench
  else
    missing+=("6:bench (needs the AR and NAR models and the codec)")
  fi
fi

if run_stage 7 export; then
  if [ -f "$exp/ar/model.safetensors" ]; then
    log "Stage 7 (export): model card of $exp/ar → $exp/export"
    rm -rf "$exp/export"
    transitions=(); [ -f "$exp/transitions.safetensors" ] && transitions=(--transitions "$exp/transitions.safetensors")
    vx export --checkpoint "$exp/ar" --to "$exp/export" "${transitions[@]+"${transitions[@]}"}"
    finish_stage export
  else
    missing+=("7:export (no AR model in $exp/ar)")
  fi
fi

if [ ${#missing[@]} -gt 0 ]; then
  log "Stages that could not run:"
  for m in "${missing[@]}"; do log "  $m"; done
fi
if [ -f "$exp/bench/bench-decode.md" ]; then
  log "Bench ($exp/bench/bench-decode.md; plots tpt.png, cer.png, nll.png there):"
  cat "$exp/bench/bench-decode.md"
fi
log "Finished the available stages; outputs in $exp"
