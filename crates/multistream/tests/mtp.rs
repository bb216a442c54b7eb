//! Multi-token prediction heads on the multi-stream LM: the cached heads equal the full
//! forward's, one head is frame AR, a tiny aligned model with 3 heads overfits two utterances
//! (every head's loss falls) and MTP decoding, independent and Viterbi, reproduces them in
//! fewer forwards; model directories keep the heads; configs written before `mtp` still load.

use std::sync::Arc;

use burn::tensor::Device;
use voxspec_data::{BucketConfig, Codes};
use voxspec_infer::{
    FrameArDecoder, FrameDecoder, FrameModel, FrameMtpDecoder, FrameRequest, SamplerConfig,
    Transitions, TransitionsConfig, ViterbiConfig,
};
use voxspec_multistream::{
    MsAlignConfig, MsFile, MsFrameLm, MsItem, MsMtpConfig, MsPrompt, MultiStreamConfig,
    MultiStreamData, MultiStreamTask, MultiStreamTaskConfig, SeqRow, load_multistream,
    save_multistream,
};
use voxspec_train::{LrSchedule, OptimConfig, TrainConfig, Trainer};

const TEXT_VOCAB: usize = 12;
const CODEBOOK: usize = 16;
const STREAMS: usize = 2;
const UNITS: usize = 2;

fn plain_config() -> MultiStreamConfig {
    MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, STREAMS).with_mtp(Some(MsMtpConfig::new(3)))
}

/// Head `i`'s logits after the cache's last step equal the extra heads of a full forward over
/// the same sequence; head 0 equals the logits `extend` returned.
#[test]
fn cached_heads_equal_the_full_forward() {
    let device = Device::flex();
    device.seed(7);
    let config = plain_config();
    let model = config.init(&device).expect("model");
    // Non-zero residuals, so the extra heads differ from plain read-outs.
    let mut model = model;
    for head in &mut model.ahead {
        head.residual.weight = burn::module::Param::from_tensor(
            head.residual
                .weight
                .val()
                .random_like(burn::tensor::Distribution::Normal(0.0, 0.2)),
        );
    }
    let lm = MsFrameLm {
        model: &model,
        config: &config,
    };
    assert_eq!(lm.heads(), 3);
    let prompt = MsPrompt {
        text: vec![1, 4, 2],
        voice: None,
        track: None,
    };
    let s = CODEBOOK as u32;
    let columns: Vec<Vec<u32>> = vec![vec![s, s], vec![3, s], vec![7, 2], vec![1, 9], vec![s, 4]];
    let mut cache = lm.new_cache(&prompt, 16).expect("cache");
    lm.prefill(&mut cache, &prompt, &columns[..2])
        .expect("prefill");
    let extended = lm.extend(&mut cache, &columns[2..]).expect("extend");
    let heads = lm.head_logits(&cache, 3).expect("heads");
    assert_eq!(heads.shape(), [3, STREAMS, CODEBOOK + 1]);
    for j in 0..STREAMS {
        assert_eq!(heads.row(0, j), extended.row(2, j));
    }
    // The full forward over voice-less text + all 5 steps.
    let steps: Vec<Vec<u32>> = (0..STREAMS)
        .map(|j| columns.iter().map(|c| c[j]).collect())
        .collect();
    let input = model
        .input(
            &config,
            &[SeqRow {
                voice: None,
                text: &prompt.text,
                steps: &steps,
                track: &[],
            }],
        )
        .expect("input");
    let hidden = model.hidden(&input).expect("hidden");
    let last = input.lens[0] - 1;
    for (i, logits) in model.ahead_logits(hidden).into_iter().enumerate() {
        let full: Vec<f32> = logits
            .narrow(1, last, 1)
            .into_data()
            .try_into_vec()
            .expect("readback");
        let cached: Vec<f32> = (0..STREAMS)
            .flat_map(|j| heads.row(i + 1, j).to_vec())
            .collect();
        let diff = full
            .iter()
            .zip(&cached)
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        assert!(
            diff < 1e-4,
            "head {}: cached vs full differ by {diff}",
            i + 1
        );
    }
    // Rolled back, the heads are gone until a step is fed again.
    lm.truncate(&mut cache, 3).expect("truncate");
    assert!(lm.head_logits(&cache, 2).is_err());
    assert!(lm.head_logits(&cache, 4).is_err());

    // One head: MTP is frame AR.
    let request = FrameRequest::new(prompt, 12, 0);
    let ar = FrameArDecoder::new()
        .generate(&lm, &request, &SamplerConfig::greedy())
        .expect("ar");
    let mtp = FrameMtpDecoder::new(1)
        .expect("decoder")
        .generate(&lm, &request, &SamplerConfig::greedy())
        .expect("mtp");
    assert_eq!(mtp.columns, ar.columns);

    // A model directory keeps the heads; a config written before `mtp` existed loads.
    let dir = tempfile::tempdir().expect("tempdir");
    let file = MsFile {
        model: config.clone(),
        codec: None,
        draft: None,
    };
    save_multistream(dir.path(), &file, &model).expect("save");
    let (loaded_file, loaded) = load_multistream(dir.path(), &device).expect("load");
    assert_eq!(loaded.ahead.len(), 2);
    let back = MsFrameLm {
        model: &loaded,
        config: &loaded_file.model,
    };
    let mut c2 = back.new_cache(&request.prompt, 16).expect("cache");
    back.prefill(&mut c2, &request.prompt, &columns)
        .expect("prefill");
    let mut c1 = lm.new_cache(&request.prompt, 16).expect("cache");
    lm.prefill(&mut c1, &request.prompt, &columns)
        .expect("prefill");
    let (a, b) = (
        lm.head_logits(&c1, 3).expect("heads"),
        back.head_logits(&c2, 3).expect("heads"),
    );
    assert_eq!(a.as_slice(), b.as_slice());
    let mut json =
        serde_json::to_value(MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, STREAMS)).expect("json");
    json.as_object_mut().expect("object").remove("mtp");
    let old: MultiStreamConfig = serde_json::from_value(json).expect("a config without mtp");
    assert_eq!(old.n_heads(), 1);
}

fn aligned_config() -> MultiStreamConfig {
    let mut c = MultiStreamConfig::tiny(TEXT_VOCAB, CODEBOOK, STREAMS)
        .with_align(Some(
            MsAlignConfig::new()
                .with_units_per_frame(UNITS)
                .with_phones_per_frame(2)
                .with_frames_ahead(2)
                .with_duration_layers(1),
        ))
        .with_mtp(Some(MsMtpConfig::new(3)));
    c.transformer = voxspec_nn::TransformerConfig::tiny()
        .with_d_model(48)
        .with_n_heads(4)
        .with_d_ff(96)
        .with_dropout(0.0);
    c
}

fn item(id: &str, text: Vec<u32>, durations: Vec<u32>, salt: u32) -> MsItem {
    let units: u32 = durations.iter().sum();
    let frames = (units as usize).div_ceil(UNITS);
    let streams: Vec<Vec<u32>> = (0..STREAMS as u32)
        .map(|j| {
            (0..frames as u32)
                .map(|t| (t * 5 + j * 3 + salt * 7 + (t * t) % 3) % CODEBOOK as u32)
                .collect()
        })
        .collect();
    MsItem {
        id: id.into(),
        text,
        codes: Codes::new(STREAMS, frames, streams.concat()).expect("codes"),
        global: None,
        durations: Some(durations),
    }
}

fn items() -> Vec<MsItem> {
    vec![
        item("a", vec![1, 2, 3, 4], vec![3, 5, 4, 4], 1),
        item("b", vec![5, 6, 7, 8, 9, 2], vec![2, 2, 6, 3, 4, 3], 2),
    ]
}

#[test]
fn three_heads_overfit_and_decode_in_fewer_forwards() {
    let config = aligned_config();
    let bucket = BucketConfig {
        max_items: 8,
        max_padded_len: 1024,
        shuffle: false,
        seed: 1,
    };
    let task = MultiStreamTask {
        model: config.clone(),
        task: MultiStreamTaskConfig {
            bucket: bucket.clone(),
        },
        train: MultiStreamData::new(items(), &config, bucket).expect("data"),
        valid: None,
        init: None,
    };
    let steps = 200;
    let train = TrainConfig {
        seed: 5,
        max_steps: steps,
        optimizer: OptimConfig {
            lr: 1e-2,
            warmup_steps: 10,
            schedule: LrSchedule::Cosine {
                decay_steps: steps,
                min_lr: 1e-3,
            },
            ..OptimConfig::default()
        },
        log_every: 1,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let device = Device::flex();
    device.seed(3);
    let outcome = Trainer::new(train, task, dir.path(), &device)
        .run(&mut ())
        .expect("training runs");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    let (first, last) = (&records[0].values, &records.last().expect("record").values);
    for term in ["streams", "ahead1", "ahead2"] {
        println!("{term}: {:.4} → {:.4}", first[term], last[term]);
        assert!(
            last[term] < 0.1,
            "{term} loss {} after {steps} steps",
            last[term]
        );
    }

    let model = outcome.model;
    let lm = MsFrameLm {
        model: &model,
        config: &config,
    };
    let transitions: Vec<Arc<Transitions>> = (0..STREAMS)
        .map(|j| {
            let sequences: Vec<Vec<u32>> = items()
                .iter()
                .map(|it| it.codes.stream(j).to_vec())
                .collect();
            Arc::new(
                Transitions::from_sequences(
                    sequences.iter().map(Vec::as_slice),
                    CODEBOOK + 1,
                    &TransitionsConfig::default(),
                )
                .expect("transitions"),
            )
        })
        .collect();
    for it in items() {
        let want: Vec<Vec<u32>> = (0..STREAMS).map(|j| it.codes.stream(j).to_vec()).collect();
        let prompt =
            MsPrompt::new(&model, &config, &it.text, None, it.durations.as_deref()).expect("p");
        let request = FrameRequest::new(prompt, 30, 0);
        let greedy = SamplerConfig::greedy();
        let ar = FrameArDecoder::new()
            .generate(&lm, &request, &greedy)
            .expect("ar");
        assert_eq!(ar.frames, want, "AR, utterance {}", it.id);
        let decoders = [
            FrameMtpDecoder::new(3).expect("mtp"),
            FrameMtpDecoder::with_viterbi(3, ViterbiConfig::new(3), transitions.clone())
                .expect("viterbi"),
        ];
        for decoder in decoders {
            let out = decoder.generate(&lm, &request, &greedy).expect("mtp");
            assert_eq!(
                out.frames,
                want,
                "{:?}, utterance {}",
                decoder.viterbi(),
                it.id
            );
            assert!(
                out.stats.target_forwards * 2 < ar.stats.target_forwards + 2,
                "{} forwards vs AR's {}",
                out.stats.target_forwards,
                ar.stats.target_forwards
            );
        }
    }
}
