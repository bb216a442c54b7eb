//! The aligned multi-stream LM: the step track reaches the model (its loss depends on it), a
//! tiny aligned model overfits two utterances and greedy decoding with their durations
//! reproduces them, the shuffled-text diagnostic scores worse than the true text, and bad
//! durations are refused naming the utterance.

use burn::tensor::Device;
use voxspec_draft::DraftSpec;
use voxspec_infer::{
    AcceptanceRule, FrameArDecoder, FrameDecoder, FrameRequest, FrameSpeculativeDecoder,
    SamplerConfig, SpeculativeConfig,
};
use voxspec_multistream::{
    DecodeRequest, MultiStreamConfig, MultiStreamData, MultiStreamTask, MultiStreamTaskConfig,
    SeqRow, greedy_decode,
};
use voxspec_multistream::{MsFrameLm, MsPrompt, MultiStreamModel, cut_draft};
use voxspec_train::{BatchSource, TrainTask};

use crate::common;

use common::{CODEBOOK, STREAMS, bucket, items, overfit};

fn config() -> MultiStreamConfig {
    common::aligned_config()
}

#[test]
fn bad_durations_are_refused_naming_the_utterance() {
    let config = config();
    let mut bad = items();
    bad[0].durations = Some(vec![3, 5, 4]);
    let err = MultiStreamData::new(bad, &config, bucket())
        .expect_err("3 durations for 4 tokens")
        .to_string();
    assert!(
        err.contains("utterance a") && err.contains("3 durations"),
        "{err}"
    );
    let mut bad = items();
    bad[1].durations = Some(vec![2, 2, 6, 3, 4, 9]);
    let err = MultiStreamData::new(bad, &config, bucket())
        .expect_err("durations longer than the codes")
        .to_string();
    assert!(
        err.contains("utterance b") && err.contains("frames"),
        "{err}"
    );
    let mut bad = items();
    bad[0].durations = None;
    assert!(MultiStreamData::new(bad, &config, bucket()).is_err());
    // A speech row without its track is refused by the input builder.
    let device = Device::flex();
    let steps = vec![vec![CODEBOOK as u32; 2]; STREAMS];
    let err = voxspec_multistream::MsInput::build(
        &config,
        &[SeqRow {
            voice: None,
            text: &[1],
            steps: &steps,
            track: &[],
        }],
        &device,
    )
    .expect_err("no track")
    .to_string();
    assert!(err.contains("step-track"), "{err}");
}

#[test]
fn aligned_model_overfits_decodes_with_its_durations_and_needs_its_text() {
    let config = config();
    let steps = 150;
    let (model, records) = overfit(&config, steps);
    let device = Device::flex();
    let last = records.last().expect("a record");
    let (streams, duration) = (last.values["streams"], last.values["duration"]);
    println!("aligned overfit: streams {streams:.4}, duration {duration:.4}");
    assert!(streams < 0.05, "streams loss {streams} after {steps} steps");
    assert!(
        duration < records[0].values["duration"] / 4.0,
        "duration loss {duration} did not fall"
    );

    for it in items() {
        let want: Vec<Vec<u32>> = (0..STREAMS).map(|j| it.codes.stream(j).to_vec()).collect();
        let got = greedy_decode(
            &model,
            &config,
            &DecodeRequest {
                text: &it.text,
                voice: None,
                prompt: &[],
                max_frames: 30,
                durations: it.durations.as_deref(),
            },
        )
        .expect("decode");
        assert_eq!(got, want, "utterance {}", it.id);
    }

    frame_decoders_agree_with_greedy_decoding(&model, &config);

    // The diagnostic: the same audio with the other utterance's text and alignment.
    let valid = MultiStreamData::new(items(), &config, bucket())
        .expect("data")
        .with_shuffled_text();
    let task = MultiStreamTask {
        model: config.clone(),
        task: MultiStreamTaskConfig { bucket: bucket() },
        train: MultiStreamData::new(items(), &config, bucket()).expect("data"),
        valid: None,
        init: None,
    };
    let batch = valid.batch(0, 0, &device).expect("batch");
    assert!(batch.shuffled.is_some());
    let losses = task.loss(&model, &batch, 0).expect("loss");
    let term = |name: &str| -> f32 {
        let t = losses
            .terms
            .iter()
            .find(|(n, _)| n == name)
            .unwrap_or_else(|| panic!("term {name}"));
        t.1.clone().into_scalar()
    };
    let (true_text, shuffled) = (term("streams"), term("streams_shuffled_text"));
    println!("true text {true_text:.4} vs shuffled {shuffled:.4}");
    assert!(
        shuffled > 10.0 * true_text + 0.3,
        "the model ignores its text: {shuffled} vs {true_text}"
    );
}

/// The `voxspec-infer` frame decoders on the real model: greedy AR through the adapter equals
/// the crate's own greedy loop, and greedy speculation with a draft cut from the target's first
/// layer (rejections do happen: it is not the target) equals greedy AR token for token.
fn frame_decoders_agree_with_greedy_decoding(model: &MultiStreamModel, config: &MultiStreamConfig) {
    let target = MsFrameLm { model, config };
    let (draft_config, draft_model) =
        cut_draft(model, config, &DraftSpec::parse("0").expect("spec")).expect("draft");
    let draft = MsFrameLm {
        model: &draft_model,
        config: &draft_config,
    };
    // An untrained draft of the same shape disagrees often: rollbacks are exercised.
    let device = burn::tensor::Device::flex();
    device.seed(99);
    let random_model = config.init(&device).expect("model");
    let random = MsFrameLm {
        model: &random_model,
        config,
    };
    let greedy = SamplerConfig::greedy();
    let mut rejected = 0usize;
    for it in items() {
        let prompt =
            MsPrompt::new(model, config, &it.text, None, it.durations.as_deref()).expect("prompt");
        let reference = greedy_decode(
            model,
            config,
            &DecodeRequest {
                text: &it.text,
                voice: None,
                prompt: &[],
                max_frames: 30,
                durations: it.durations.as_deref(),
            },
        )
        .expect("decode");
        let request = FrameRequest::new(prompt, 30, 0);
        let ar = FrameArDecoder::new()
            .generate(&target, &request, &greedy)
            .expect("frame AR");
        assert_eq!(ar.frames, reference, "utterance {}", it.id);
        for gamma in [1, 3] {
            for rule in [
                AcceptanceRule::Exact,
                AcceptanceRule::Tolerance { beta: 0.4 },
            ] {
                let config = SpeculativeConfig::new(gamma, rule);
                let cut = FrameSpeculativeDecoder::new(draft, config.clone())
                    .expect("decoder")
                    .generate(&target, &request, &greedy)
                    .expect("speculative");
                assert_eq!(cut.frames, ar.frames, "utterance {}, γ {gamma}", it.id);
                if gamma == 3 {
                    assert!(cut.stats.target_forwards < ar.stats.target_forwards);
                }
                let out = FrameSpeculativeDecoder::new(random, config)
                    .expect("decoder")
                    .generate(&target, &request, &greedy)
                    .expect("speculative");
                assert_eq!(out.frames, ar.frames, "utterance {}, γ {gamma}", it.id);
                let s = &out.stats;
                rejected += s.drafted.iter().sum::<usize>() - s.accepted.iter().sum::<usize>();
            }
        }
    }
    assert!(
        rejected > 0,
        "the cut draft never disagreed: the test would not see a bad rollback"
    );
}
