//! A batch gives every utterance the codes and audio it gets alone (each request keeps its own
//! seed; ragged lengths), for AR, MTP and self-speculation, on every engine (Burn, native with
//! f32 and with bf16 weights).

use std::path::Path;

use burn::tensor::Device;
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    DecoderParts, DecoderSpec, EngineKind, Lengths, Pipeline, RuleSpec, SpeechItem,
    write_untrained_experiment,
};

#[test]
fn a_batch_equals_its_requests_alone() {
    let dir = tempfile::tempdir().unwrap();
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let device = Device::flex();
    let mut paths = write_untrained_experiment(dir.path(), &codec, &device).unwrap();
    let sentences = [
        ("Hello.", 3),
        ("The cat sat on the mat.", 11),
        ("A longer sentence with rather more words in it.", 5),
    ];
    for engine in [
        EngineKind::Native,
        EngineKind::NativeBf16,
        EngineKind::NativeInt8,
        EngineKind::Burn,
    ] {
        paths.engine = engine;
        let pipeline = Pipeline::load(&paths, &device).unwrap();
        let items: Vec<SpeechItem> = sentences
            .iter()
            .map(|&(text, seed)| {
                let text = pipeline.text_ids(text).unwrap();
                let request = pipeline
                    .request(&text, None, &Lengths::default(), seed)
                    .unwrap();
                SpeechItem {
                    request,
                    text,
                    prompt: None,
                }
            })
            .collect();
        let specs = [
            DecoderSpec::Ar,
            DecoderSpec::Mtp { heads: 2 },
            DecoderSpec::SelfSpec {
                rule: RuleSpec::Sd,
                gamma: 2,
            },
        ];
        let sampler = SamplerConfig::default();
        for spec in &specs {
            let mut decoder = DecoderParts::default().build(spec, &pipeline.lm).unwrap();
            let batch = pipeline
                .synthesize_batch(decoder.as_mut(), &items, &sampler)
                .unwrap();
            assert_eq!(batch.len(), items.len());
            let lengths: Vec<usize> = batch.iter().map(|s| s.generation.tokens.len()).collect();
            for (item, together) in items.iter().zip(&batch) {
                let alone = pipeline
                    .synthesize(decoder.as_mut(), &item.request, &item.text, None, &sampler)
                    .unwrap();
                assert_eq!(
                    together.generation.tokens,
                    alone.generation.tokens,
                    "{engine:?} {}: lengths in the batch {lengths:?}",
                    spec.label()
                );
                assert_eq!(
                    together.samples,
                    alone.samples,
                    "{engine:?} {}",
                    spec.label()
                );
            }
        }
    }
}
