//! Multi-token prediction heads on the multi-stream LM: the cached heads equal the full
//! forward's, one head is frame AR, a tiny aligned model with 3 heads overfits two utterances
//! (every head's loss falls) and MTP decoding, independent and Viterbi, reproduces them in
//! fewer forwards; model directories keep the heads; configs written before `mtp` still load.

use std::sync::Arc;

use burn::tensor::Device;
use voxspec_infer::{
    FrameArDecoder, FrameDecoder, FrameModel, FrameMtpDecoder, FrameRequest, SamplerConfig,
    Transitions, TransitionsConfig, ViterbiConfig,
};
use voxspec_multistream::{
    MsFile, MsFrameLm, MsMtpConfig, MsPrompt, MultiStreamConfig, SeqRow, load_multistream,
    save_multistream,
};

use crate::common;

use common::{CODEBOOK, STREAMS, TEXT_VOCAB, items, overfit};

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

#[test]
fn three_heads_overfit_and_decode_in_fewer_forwards() {
    let config = common::aligned_config().with_mtp(Some(MsMtpConfig::new(3)));
    let steps = 200;
    let (model, records) = overfit(&config, steps);
    let (first, last) = (&records[0].values, &records.last().expect("record").values);
    for term in ["streams", "ahead1", "ahead2"] {
        println!("{term}: {:.4} → {:.4}", first[term], last[term]);
        assert!(
            last[term] < 0.1,
            "{term} loss {} after {steps} steps",
            last[term]
        );
    }

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
