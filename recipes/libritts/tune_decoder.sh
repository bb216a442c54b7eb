#!/usr/bin/env bash
# Fit the codec decoder to the codes synthesis gives it, after the main job (train_mtp.sh).
#
#   stage 0  fill    the recordings' RVQ-1 codes of <exp>/tokens with layers 2..N filled in by
#                    <exp>/nar (`voxspec codec fill`, train and dev) → <exp>/fill
#   stage 1  tune    the codec's decoder alone, trained to turn those codes into the recordings
#                    (`voxspec codec train --decoder-only --decoder-codes`; the encoder and the
#                    codebooks stay as they are, so every language model on its codes stays
#                    valid) → <exp>/codec-tuned; use it with `synthesize --codec`, or copy it
#                    over the experiment's codec
#   stage 2  mel     a codes → log-mel decoder (`voxspec codec train-mel`) of the first
#                    --mel-layers RVQ layers (default 1: RVQ-1 alone, which the AR model writes,
#                    so synthesis runs no NAR stage), told each frame's phone (the data's
#                    alignments in training, the durations the aligned AR model speaks at
#                    synthesis; --no-mel-phones: codes alone), on the recordings' own codes
#                    (<exp>/tokens, --mel-steps); with more layers then fitted to <exp>/fill
#                    (--mel-fill-steps)
#                    → <exp>/mel_decoder, which synthesize, serve and the bench of <exp> then
#                    render with instead of the codec's decoder
#   stage 3  vocoder a vocoder of that log-mel trained on the recordings (`voxspec vocoder
#                    train`, from checkpoints/vocoder-minitts, --vocoder-steps, then
#                    --vocoder-phase-steps with APNet's phase losses) → <exp>/vocoder,
#                    which renders the mel decoder's log-mel (without it: Griffin-Lim) and lets
#                    a stream start before the sentence's last frame is rendered
#
# No NAR reproduces the codec's upper RVQ layers (a few percent of its codes match), so a
# decoder that has only seen its encoder's codes renders generated speech worse than it could.
# Each finished stage leaves <exp>/.done/<stage>.done and is skipped on a rerun.
set -euo pipefail

cd "$(dirname "$0")/../.."   # repository root
. recipes/common.sh

stage=0
stop_stage=100
exp=exp/kathleen
steps=1500
mel_layers=1
mel_phones=true
mel_steps=1600
mel_fill_steps=1000
vocoder_steps=1500
vocoder_phase_steps=1500
threads=""
force_stages=()

usage() {
  sed -n '2,24p' "$0" | sed 's/^# \{0,1\}//'
  cat <<USAGE

Usage: $0 [options]
  --exp DIR          the main job's experiment (default exp/kathleen): data/, tokens/, nar/,
                     codec (a link to the codec its codes came from)
  --steps N          decoder training steps (default 1500: about 35 minutes on 2 cores)
  --mel-layers N     RVQ layers the mel decoder reads (default 1; the NAR runs only the stages
                     for them at synthesis, so 1 runs none: half the pipeline's time)
  --no-mel-phones    the mel decoder reads codes alone (by default it also reads each frame's
                     phone, which needs the data's alignments and an aligned AR model; without
                     them one layer costs about 3 points of WER, with them it gains about 13;
                     see docs/codecs.md)
  --mel-steps N      mel decoder steps on the recordings' codes (default 1600: 40 minutes)
  --mel-fill-steps N with --mel-layers above 1, steps on the filled codes (default 1000)
  --vocoder-steps N  vocoder steps on the recordings (default 1500: 18 minutes)
  --vocoder-phase-steps N
                     then steps with the phase losses, lr 3e-4 (default 1500: 40 minutes; 0: none)
  --threads N        worker threads
  --stage N          first stage to run (default 0)
  --stop-stage N     last stage to run
  --force-stage NAME rerun a finished stage (fill, tune, mel, vocoder)
USAGE
}

while [ $# -gt 0 ]; do
  case "$1" in
    --exp) exp="$2"; shift 2 ;;
    --steps) steps="$2"; shift 2 ;;
    --mel-layers) mel_layers="$2"; shift 2 ;;
    --no-mel-phones) mel_phones=false; shift ;;
    --mel-steps) mel_steps="$2"; shift 2 ;;
    --mel-fill-steps) mel_fill_steps="$2"; shift 2 ;;
    --vocoder-steps) vocoder_steps="$2"; shift 2 ;;
    --vocoder-phase-steps) vocoder_phase_steps="$2"; shift 2 ;;
    --threads) threads="$2"; shift 2 ;;
    --stage) stage="$2"; shift 2 ;;
    --stop-stage) stop_stage="$2"; shift 2 ;;
    --force-stage) force_stages+=("$2"); shift 2 ;;
    -h|--help) usage; exit 0 ;;
    *) echo "unknown option: $1 (see --help)" >&2; exit 2 ;;
  esac
done

for need in data tokens nar codec; do
  [ -e "$exp/$need" ] || { echo "$exp/$need is missing: run recipes/libritts/train_mtp.sh --exp $exp first" >&2; exit 1; }
done
global=(); [ -n "$threads" ] && global+=(--threads "$threads")
build_voxspec
init_stages "$exp"
codec=$(readlink -f "$exp/codec")

if run_stage 0 fill; then
  log "Stage 0 (fill): RVQ-1 of $exp/tokens with layers 2..N from $exp/nar → $exp/fill"
  rm -rf "$exp/fill"
  vx codec fill --exp "$exp" --codec "$codec" --tokens "$exp/tokens" --data "$exp/data" \
    --splits train,dev --out "$exp/fill"
  finish_stage fill
fi

if run_stage 1 tune; then
  log "Stage 1 (tune): the decoder of $codec, $steps steps on $exp/fill → $exp/codec-tuned"
  if [ -n "$(resume_flag "$exp/codec-tuned")" ]; then
    # An interrupted run: its settings (start, codes, decoder only) are in its run.json.
    vx codec train --data "$exp/data" --out "$exp/codec-tuned" --resume --steps "$steps"
  else
    vx codec train --data "$exp/data" --out "$exp/codec-tuned" --init "$codec" --decoder-only \
      --decoder-codes "$exp/fill" --steps "$steps" --segment 1.0 --batch 4 \
      --valid-every 250 --checkpoint-every 250
  fi
  finish_stage tune
  log "Decoder: $exp/codec-tuned (voxspec synthesize --exp $exp --codec $exp/codec-tuned ...)"
fi

if run_stage 2 mel; then
  log "Stage 2 (mel): a mel decoder of $mel_layers RVQ layer(s) (phones: $mel_phones), $mel_steps steps on $exp/tokens"
  layers=(--layers "$mel_layers")
  if $mel_phones; then layers+=(--phones); fi
  fit_fill=true; [ "$mel_layers" -gt 1 ] || fit_fill=false
  # A finished run has its model; an interrupted one resumes with its saved settings.
  if [ ! -f "$exp/mel-codes/model.safetensors" ]; then
    vx codec train-mel --data "$exp/data" --codes "$exp/tokens" --out "$exp/mel-codes" \
      "${layers[@]}" --steps "$mel_steps" --valid-every 200 --checkpoint-every 200 \
      $(resume_flag "$exp/mel-codes")
  fi
  mel_run="$exp/mel-codes"
  # Layers past RVQ-1 come from the NAR at synthesis: the decoder is fitted to the NAR's codes.
  if $fit_fill && [ ! -f "$exp/mel-fill/model.safetensors" ]; then
    log "  then $mel_fill_steps steps on $exp/fill"
    vx codec train-mel --data "$exp/data" --codes "$exp/fill" --init "$exp/mel-codes" \
      --out "$exp/mel-fill" --steps "$mel_fill_steps" --lr 0.0005 --valid-every 250 \
      --checkpoint-every 250 $(resume_flag "$exp/mel-fill")
  fi
  if $fit_fill; then mel_run="$exp/mel-fill"; fi
  rm -rf "$exp/mel_decoder"
  vx export --checkpoint "$mel_run" --to "$exp/mel_decoder" --dtype bf16
  finish_stage mel
  log "Mel decoder: $exp/mel_decoder (synthesize --exp $exp renders with it; --codec-decoder not)"
fi

if run_stage 3 vocoder; then
  log "Stage 3 (vocoder): $vocoder_steps steps on the recordings of $exp/data → $exp/vocoder"
  if [ ! -f "$exp/vocoder-run/model.safetensors" ]; then
    vx vocoder train --data "$exp/data" --out "$exp/vocoder-run" \
      --init checkpoints/vocoder-minitts --steps "$vocoder_steps" --valid-every 500 \
      --checkpoint-every 250 $(resume_flag "$exp/vocoder-run")
  fi
  vocoder_run="$exp/vocoder-run"
  if [ "$vocoder_phase_steps" -gt 0 ]; then
    log "Stage 3 (vocoder): $vocoder_phase_steps steps with the phase losses → $exp/vocoder-phase"
    if [ ! -f "$exp/vocoder-phase/model.safetensors" ]; then
      vx vocoder train --data "$exp/data" --out "$exp/vocoder-phase" --init "$exp/vocoder-run" \
        --steps "$vocoder_phase_steps" --lr 3e-4 --phase-weight 1 --valid-every 500 \
        --checkpoint-every 250 $(resume_flag "$exp/vocoder-phase")
    fi
    vocoder_run="$exp/vocoder-phase"
  fi
  rm -rf "$exp/vocoder"
  vx export --checkpoint "$vocoder_run" --to "$exp/vocoder"
  finish_stage vocoder
  log "Vocoder: $exp/vocoder (synthesize --exp $exp renders the mel decoder's log-mel with it)"
fi
