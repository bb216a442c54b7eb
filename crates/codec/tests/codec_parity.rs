//! Parity of the Burn SpeechTokenizer with the `speechtokenizer` package on a tiny random
//! model, and the loader's error reporting. The fixture is made by
//! `fixtures/make_speechtokenizer_fixture.py` (no Python is needed to run these tests).

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Int, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use voxspec_codec::speechtokenizer::KEY_MAP;
use voxspec_codec::{CodecError, SpeechTokenizer};

const TOLERANCE: f32 = 1e-4;

fn fixture_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/speechtokenizer_tiny")
}

/// (name, dtype, shape, bytes) of every tensor of a safetensors file.
type Entry = (String, Dtype, Vec<usize>, Vec<u8>);

fn read_entries(path: &Path) -> Vec<Entry> {
    let bytes = std::fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut entries: Vec<Entry> = file
        .tensors()
        .into_iter()
        .map(|(name, v)| (name, v.dtype(), v.shape().to_vec(), v.data().to_vec()))
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

fn write_entries(path: &Path, entries: &[Entry]) {
    let views: Vec<(String, TensorView<'_>)> = entries
        .iter()
        .map(|(name, dtype, shape, data)| {
            (
                name.clone(),
                TensorView::new(*dtype, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    std::fs::write(path, safetensors::serialize(views, None).unwrap()).unwrap();
}

fn find<'a>(entries: &'a [Entry], name: &str) -> &'a Entry {
    entries
        .iter()
        .find(|e| e.0 == name)
        .unwrap_or_else(|| panic!("io.safetensors lacks {name}"))
}

fn f32s(e: &Entry) -> Vec<f32> {
    assert_eq!(e.1, Dtype::F32, "{}", e.0);
    e.3.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

fn i64s(e: &Entry) -> Vec<i64> {
    assert_eq!(e.1, Dtype::I64, "{}", e.0);
    e.3.chunks_exact(8)
        .map(|b| i64::from_le_bytes(b.try_into().unwrap()))
        .collect()
}

fn wave(entries: &[Entry], device: &Device) -> Tensor<3> {
    let e = find(entries, "wave");
    Tensor::from_data(TensorData::new(f32s(e), [e.2[0], e.2[1], e.2[2]]), device)
}

fn floats<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data()
        .convert::<f32>()
        .try_into_vec::<f32>()
        .unwrap()
}

fn ints(t: Tensor<3, Int>) -> Vec<i64> {
    t.into_data()
        .convert::<i64>()
        .try_into_vec::<i64>()
        .unwrap()
}

fn assert_close(name: &str, got: Tensor<3>, want: &Entry) {
    assert_eq!(got.dims().to_vec(), want.2, "{name} shape");
    let (got, want) = (floats(got), f32s(want));
    let max = got
        .iter()
        .zip(&want)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    eprintln!("{name}: max abs difference {max:e}");
    assert!(max < TOLERANCE, "{name}: max abs difference {max}");
}

#[test]
fn loaded_model_matches_the_package() {
    let device = Device::flex();
    let model = SpeechTokenizer::load(fixture_dir(), &device).unwrap();
    let io = read_entries(&fixture_dir().join("io.safetensors"));
    let x = wave(&io, &device);

    let latents = model.latents(x.clone()).unwrap();
    assert_close("latents", latents, find(&io, "latents"));

    let codes = model.encode(x.clone(), model.n_q()).unwrap();
    assert_eq!(codes.dims().to_vec(), find(&io, "codes").2);
    assert_eq!(ints(codes.clone()), i64s(find(&io, "codes")), "codes");

    let out = model.forward(x.clone(), model.n_q()).unwrap();
    assert_eq!(ints(out.quant.codes), i64s(find(&io, "codes")));
    assert_close("audio", out.audio, find(&io, "audio"));
    assert_close("semantic", out.semantic, find(&io, "semantic"));
    assert_close(
        "decoded",
        model.decode(codes).unwrap(),
        find(&io, "decoded"),
    );

    let codes_2 = model.encode(x, 2).unwrap();
    assert_eq!(ints(codes_2.clone()), i64s(find(&io, "codes_2")), "codes_2");
    assert_close(
        "decoded_2",
        model.decode(codes_2).unwrap(),
        find(&io, "decoded_2"),
    );
}

#[test]
fn key_map_covers_every_tensor_family_of_the_fixture() {
    let entries = read_entries(&fixture_dir().join("model.safetensors"));
    let families = [
        ".conv.conv.weight_g",
        ".convtr.convtr.weight_v",
        ".lstm.weight_ih_l1_reverse",
        "._codebook.embed_avg",
        "transform.weight",
    ];
    for family in families {
        assert!(entries.iter().any(|e| e.0.ends_with(family)), "{family}");
    }
    assert!(KEY_MAP.iter().any(|(from, _)| from.contains("lstm")));
    assert!(KEY_MAP.iter().any(|(from, _)| from.contains("_codebook")));
}

/// A copy of the fixture with its config edited by `config` and its weights by `weights`.
fn edited(
    config: impl FnOnce(&mut serde_json::Value),
    weights: impl FnOnce(&mut Vec<Entry>),
) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(fixture_dir().join("config.json")).unwrap();
    let mut json: serde_json::Value = serde_json::from_str(&text).unwrap();
    config(&mut json);
    std::fs::write(dir.path().join("config.json"), json.to_string()).unwrap();
    let mut entries = read_entries(&fixture_dir().join("model.safetensors"));
    weights(&mut entries);
    write_entries(&dir.path().join("model.safetensors"), &entries);
    dir
}

#[test]
fn config_that_does_not_match_the_weights_lists_names_and_shapes() {
    let device = Device::flex();
    let dir = edited(|c| c["codebook_size"] = 64.into(), |_| {});
    let err = SpeechTokenizer::load(dir.path(), &device).unwrap_err();
    let CodecError::CheckpointMismatch { problems, .. } = &err else {
        panic!("unexpected error {err}");
    };
    // Every codebook tensor of every layer is reported, with both shapes.
    assert_eq!(problems.len(), 3 * 3, "{err}");
    let msg = err.to_string();
    assert!(
        msg.contains("quantizer.vq.layers.2._codebook.embed_avg"),
        "{msg}"
    );
    assert!(
        msg.contains("[32, 16]") && msg.contains("[64, 16]"),
        "{msg}"
    );

    let dir = edited(|c| c["semantic_dimension"] = 10.into(), |_| {});
    let msg = SpeechTokenizer::load(dir.path(), &device)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("transform.weight"), "{msg}");
}

#[test]
fn missing_and_unexpected_tensors_are_named() {
    let device = Device::flex();
    let dir = edited(
        |_| {},
        |entries| {
            entries.retain(|e| e.0 != "decoder.model.1.lstm.bias_hh_l1");
            let extra = entries[0].clone();
            entries.push(("decoder.extra.weight".into(), extra.1, extra.2, extra.3));
        },
    );
    let msg = SpeechTokenizer::load(dir.path(), &device)
        .unwrap_err()
        .to_string();
    assert!(msg.contains("decoder.model.1.lstm.bias_hh_l1"), "{msg}");
    assert!(msg.contains("decoder.extra.weight"), "{msg}");
}

#[test]
fn folded_weights_are_accepted() {
    // A state dict with plain `weight`s (weight norm removed) loads to the same model.
    let device = Device::flex();
    let dir = edited(
        |_| {},
        |entries| {
            let gains: Vec<Entry> = entries
                .iter()
                .filter(|e| e.0.ends_with(".weight_g"))
                .cloned()
                .collect();
            for g in gains {
                let base = g.0.trim_end_matches("_g").to_string();
                let v = entries
                    .iter()
                    .find(|e| e.0 == format!("{base}_v"))
                    .unwrap()
                    .clone();
                let (gv, vv) = (f32s(&g), f32s(&v));
                let per = vv.len() / gv.len();
                let mut w = vv.clone();
                for (i, gain) in gv.iter().enumerate() {
                    let row = &vv[i * per..(i + 1) * per];
                    let norm = row.iter().map(|x| x * x).sum::<f32>().sqrt();
                    for (j, x) in row.iter().enumerate() {
                        w[i * per + j] = gain * x / norm;
                    }
                }
                entries.retain(|e| e.0 != g.0 && e.0 != v.0);
                let bytes = w.iter().flat_map(|x| x.to_le_bytes()).collect();
                entries.push((base, Dtype::F32, v.2.clone(), bytes));
            }
        },
    );
    let model = SpeechTokenizer::load(dir.path(), &device).unwrap();
    let io = read_entries(&fixture_dir().join("io.safetensors"));
    let out = model.forward(wave(&io, &device), model.n_q()).unwrap();
    assert_close("audio", out.audio, find(&io, "audio"));
}
