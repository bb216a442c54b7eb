//! Long-form synthesis: a text is spoken sentence by sentence, each piece exactly as it is
//! spoken alone (its own seed), joined by the configured pauses; a sentence too long for the
//! context is split into clauses that fit.

use std::path::Path;

use burn::tensor::Device;
use voxspec_infer::SamplerConfig;
use voxspec_tts::{
    DecoderParts, DecoderSpec, Lengths, LongForm, Pipeline, TtsError, write_untrained_experiment,
};

#[test]
fn a_long_text_is_its_sentences_spoken_alone_and_joined_by_pauses() {
    let dir = tempfile::tempdir().unwrap();
    let codec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../checkpoints/codec-minitts");
    let device = Device::flex();
    let paths = write_untrained_experiment(dir.path(), &codec, &device).unwrap();
    let pipeline = Pipeline::load(&paths, &device).unwrap();
    let mut decoder = DecoderParts::default()
        .build(&DecoderSpec::Ar, &pipeline.lm)
        .unwrap();
    let sampler = SamplerConfig::default();
    let lengths = Lengths::default();
    let config = LongForm::default();
    let rate = pipeline.sample_rate() as f32;
    let seed = 40;

    // one sentence: exactly `synthesize`
    let ids = pipeline.text_ids("The cat sat.").unwrap();
    let request = pipeline.request(&ids, None, &lengths, seed).unwrap();
    let alone = pipeline
        .synthesize(decoder.as_mut(), &request, &ids, None, &sampler)
        .unwrap();
    let mut none = |_: &[f32]| Ok(());
    let long = pipeline
        .synthesize_text(
            decoder.as_mut(),
            "The cat sat.",
            None,
            &lengths,
            &sampler,
            seed,
            &config,
            &mut none,
        )
        .unwrap();
    assert_eq!(long.samples, alone.samples);

    // three sentences, a paragraph break after the second
    let text = "Hello there. The cat sat on the mat.\n\nA dog barked.";
    let mut streamed: Vec<f32> = Vec::new();
    let mut calls = 0;
    let mut collect = |s: &[f32]| {
        streamed.extend_from_slice(s);
        calls += 1;
        Ok(())
    };
    let long = pipeline
        .synthesize_text(
            decoder.as_mut(),
            text,
            None,
            &lengths,
            &sampler,
            seed,
            &config,
            &mut collect,
        )
        .unwrap();
    assert_eq!(calls, 3);
    assert_eq!(streamed, long.samples);
    let texts: Vec<&str> = long.pieces.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(
        texts,
        ["Hello there.", "The cat sat on the mat.", "A dog barked."]
    );
    let pauses = [config.sentence_pause, config.paragraph_pause, 0.0];
    for (i, (piece, pause)) in long.pieces.iter().zip(pauses).enumerate() {
        let ids = pipeline.text_ids(&piece.text).unwrap();
        let request = pipeline
            .request(&ids, None, &lengths, seed + i as u64)
            .unwrap();
        let alone = pipeline
            .synthesize(decoder.as_mut(), &request, &ids, None, &sampler)
            .unwrap();
        assert_eq!(
            &long.samples[piece.start..piece.start + piece.len],
            alone.samples.as_slice(),
            "piece {i}"
        );
        let silence = (pause * rate).round() as usize;
        let end = long
            .pieces
            .get(i + 1)
            .map_or(long.samples.len(), |p| p.start);
        assert_eq!(
            end - piece.start - piece.len,
            silence,
            "pause after piece {i}"
        );
        assert!(
            long.samples[piece.start + piece.len..end]
                .iter()
                .all(|&s| s == 0.0)
        );
    }

    // a sentence longer than the tiny model's 64 positions: clauses that each fit
    let words = "red green blue yellow orange purple brown black white grey pink gold";
    let sentence = format!("{words}, {words} {words}; {words}.");
    let long_one = pipeline
        .request(&pipeline.text_ids(&sentence).unwrap(), None, &lengths, seed)
        .unwrap_err();
    assert!(matches!(long_one, TtsError::TooLong(_)), "{long_one}");
    let plan = pipeline
        .plan_text(&sentence, None, &lengths, &config, seed)
        .unwrap();
    assert!(plan.len() >= 3, "{}", plan.len());
    let joined: Vec<&str> = plan.iter().map(|p| p.text.as_str()).collect();
    assert_eq!(joined.join(" "), sentence);
    assert!(
        plan[..plan.len() - 1]
            .iter()
            .all(|p| p.pause == config.clause_pause)
    );
    // nothing to speak, or a word no split can shorten
    assert!(
        pipeline
            .plan_text(" \n ", None, &lengths, &config, seed)
            .is_err()
    );
    let word = "supercalifragilistic".repeat(8);
    let err = pipeline
        .plan_text(&word, None, &lengths, &config, seed)
        .unwrap_err();
    assert!(matches!(err, TtsError::TooLong(_)), "{err}");
}
