//! Parity of the Burn HuBERT with Python `transformers.HubertModel` on a tiny random model, and
//! the loader's error reporting. The fixture is made by `fixtures/make_hubert_fixture.py`
//! (no Python is needed to run these tests).

use std::path::{Path, PathBuf};

use burn::tensor::{Device, Tensor, TensorData};
use safetensors::{Dtype, SafeTensors, tensor::TensorView};
use voxspec_nn::weights::WeightError;
use voxspec_teacher::hubert::KEY_MAP;
use voxspec_teacher::{Hubert, HubertTeacher, LayerSelection, SemanticTeacher, TeacherError};

const TOLERANCE: f32 = 1e-4;

/// hubert-base layout: post-norm layers, GroupNorm feature encoder, even positional kernel.
const BASE: &str = "hubert_tiny";
/// hubert-large layout: pre-norm layers, LayerNorm feature encoder, conv bias, odd kernel.
const LARGE: &str = "hubert_tiny_large";

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

fn fixture_dir() -> PathBuf {
    fixture(BASE)
}

/// A tensor of a safetensors file, owned: (name, shape, little-endian f32 bytes).
type Entry = (String, Vec<usize>, Vec<u8>);

fn read_entries(path: &Path) -> Vec<Entry> {
    let bytes = std::fs::read(path).unwrap();
    let file = SafeTensors::deserialize(&bytes).unwrap();
    let mut entries: Vec<Entry> = file
        .tensors()
        .into_iter()
        .map(|(name, view)| {
            assert_eq!(view.dtype(), Dtype::F32, "{name}");
            (name, view.shape().to_vec(), view.data().to_vec())
        })
        .collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    entries
}

fn write_entries(path: &Path, entries: &[Entry]) {
    let views: Vec<(String, TensorView<'_>)> = entries
        .iter()
        .map(|(name, shape, data)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), data).unwrap(),
            )
        })
        .collect();
    let bytes = safetensors::serialize(views, None).unwrap();
    std::fs::write(path, bytes).unwrap();
}

/// A copy of the fixture model directory whose weight tensors went through `edit`.
fn edited_fixture(edit: impl FnOnce(&mut Vec<Entry>)) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::copy(
        fixture_dir().join("config.json"),
        dir.path().join("config.json"),
    )
    .unwrap();
    let mut entries = read_entries(&fixture_dir().join("model.safetensors"));
    edit(&mut entries);
    write_entries(&dir.path().join("model.safetensors"), &entries);
    dir
}

fn to_f32(bytes: &[u8]) -> Vec<f32> {
    bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// The fixture's input waveform `[batch, samples]` and reference hidden states.
struct Reference {
    wave: Vec<f32>,
    wave_shape: [usize; 2],
    hidden_states: Vec<(Vec<usize>, Vec<f32>)>,
    last_hidden_state: (Vec<usize>, Vec<f32>),
}

fn reference() -> Reference {
    reference_of(BASE)
}

fn reference_of(name: &str) -> Reference {
    let entries = read_entries(&fixture(name).join("io.safetensors"));
    let find = |name: &str| {
        entries
            .iter()
            .find(|e| e.0 == name)
            .unwrap_or_else(|| panic!("io.safetensors lacks {name}"))
    };
    let wave = find("wave");
    let mut hidden_states = Vec::new();
    while let Some(e) = entries
        .iter()
        .find(|e| e.0 == format!("hidden_state_{}", hidden_states.len()))
    {
        hidden_states.push((e.1.clone(), to_f32(&e.2)));
    }
    let last = find("last_hidden_state");
    Reference {
        last_hidden_state: (last.1.clone(), to_f32(&last.2)),
        wave: to_f32(&wave.2),
        wave_shape: [wave.1[0], wave.1[1]],
        hidden_states,
    }
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().unwrap()
}

fn max_abs_diff(a: &[f32], b: &[f32]) -> f32 {
    assert_eq!(a.len(), b.len());
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0, f32::max)
}

/// Runs `model` on the fixture waveform; returns the hidden states and then the last hidden
/// state as (shape, values).
fn run(model: &Hubert, reference: &Reference, device: &Device) -> Vec<(Vec<usize>, Vec<f32>)> {
    let wave = Tensor::<2>::from_data(
        TensorData::new(reference.wave.clone(), reference.wave_shape),
        device,
    );
    let out = model.forward(wave);
    out.hidden_states
        .into_iter()
        .chain([out.last_hidden_state])
        .map(|h| (h.dims().to_vec(), values(h)))
        .collect()
}

fn assert_parity(name: &str) {
    let device = Device::flex();
    let model = Hubert::load(fixture(name), &device).unwrap();
    let reference = reference_of(name);
    assert_eq!(reference.hidden_states.len(), 3, "fixture: 2 layers + 1");
    let ours = run(&model, &reference, &device);
    let want_all: Vec<_> = reference
        .hidden_states
        .iter()
        .chain([&reference.last_hidden_state])
        .collect();
    assert_eq!(ours.len(), want_all.len());
    for (i, ((shape, got), (ref_shape, want))) in ours.iter().zip(want_all).enumerate() {
        let label = if i + 1 == ours.len() {
            "last_hidden_state".to_string()
        } else {
            format!("hidden_state_{i}")
        };
        assert_eq!(shape, ref_shape, "{name} {label}");
        let err = max_abs_diff(got, want);
        let scale = want.iter().fold(0.0f32, |m, x| m.max(x.abs()));
        eprintln!("{name} {label} {shape:?}: max abs error {err:.3e} (max |ref| {scale:.3})");
        assert!(err <= TOLERANCE, "{name} {label}: max abs error {err}");
    }
}

#[test]
fn hidden_states_match_transformers_base_layout() {
    assert_parity(BASE);
}

#[test]
fn hidden_states_match_transformers_large_layout() {
    assert_parity(LARGE);
}

#[test]
fn old_weight_norm_names_and_task_prefix_load_the_same_model() {
    let device = Device::flex();
    let reference = reference();
    let expected = run(
        &Hubert::load(fixture_dir(), &device).unwrap(),
        &reference,
        &device,
    );
    let old_names = edited_fixture(|entries| {
        for e in entries.iter_mut() {
            e.0 =
                e.0.replace("parametrizations.weight.original0", "weight_g")
                    .replace("parametrizations.weight.original1", "weight_v");
        }
        assert!(entries.iter().any(|e| e.0.ends_with("weight_g")));
    });
    let ctc = edited_fixture(|entries| {
        for e in entries.iter_mut() {
            e.0 = format!("hubert.{}", e.0);
        }
        // The CTC head of `HubertForCTC` is outside the base model and ignored.
        entries.push(("lm_head.weight".into(), vec![2, 2], vec![0; 16]));
    });
    for dir in [&old_names, &ctc] {
        let model = Hubert::load(dir.path(), &device).unwrap();
        for ((_, got), (_, want)) in run(&model, &reference, &device).iter().zip(&expected) {
            assert_eq!(max_abs_diff(got, want), 0.0);
        }
    }
    // A path to the weight file itself works too.
    Hubert::load(ctc.path().join("model.safetensors"), &device).unwrap();
}

#[test]
fn shape_mismatch_names_tensor_and_both_shapes() {
    let dir = edited_fixture(|entries| {
        let e = entries
            .iter_mut()
            .find(|e| e.0 == "encoder.layers.1.attention.q_proj.weight")
            .unwrap();
        e.1 = vec![32, 31];
        e.2.truncate(32 * 31 * 4);
    });
    let err = Hubert::load(dir.path(), &Device::flex()).unwrap_err();
    assert!(
        matches!(
            err,
            TeacherError::Weights(WeightError::ShapeMismatch { .. })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("encoder.layers.1.attention.q_proj.weight"),
        "{msg}"
    );
    assert!(
        msg.contains("[32, 31]") && msg.contains("[32, 32]"),
        "{msg}"
    );
}

#[test]
fn missing_tensor_is_named() {
    let dir = edited_fixture(|entries| {
        entries.retain(|e| e.0 != "encoder.layers.1.final_layer_norm.bias");
    });
    let err = Hubert::load(dir.path(), &Device::flex()).unwrap_err();
    assert!(
        matches!(
            err,
            TeacherError::Weights(WeightError::MissingTensor { .. })
        ),
        "{err:?}"
    );
    let msg = err.to_string();
    assert!(
        msg.contains("encoder.layers.1.final_layer_norm.bias"),
        "{msg}"
    );
}

#[test]
fn unexpected_tensor_is_named() {
    let dir = edited_fixture(|entries| {
        entries.push((
            "encoder.layers.2.layer_norm.weight".into(),
            vec![4],
            vec![0; 16],
        ));
    });
    let err = Hubert::load(dir.path(), &Device::flex()).unwrap_err();
    assert!(
        matches!(
            err,
            TeacherError::Weights(WeightError::UnexpectedTensors { .. })
        ),
        "{err:?}"
    );
    assert!(
        err.to_string()
            .contains("encoder.layers.2.layer_norm.weight"),
        "{err}"
    );
}

#[test]
fn wrong_files_are_named() {
    let dir = edited_fixture(|_| {});
    let weights = dir.path().join("model.safetensors");
    std::fs::write(&weights, b"this is not a safetensors file").unwrap();
    let err = Hubert::load(dir.path(), &Device::flex()).unwrap_err();
    assert!(
        matches!(err, TeacherError::Weights(WeightError::Safetensors { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("model.safetensors"), "{err}");

    std::fs::remove_file(dir.path().join("config.json")).unwrap();
    let err = Hubert::load(dir.path(), &Device::flex()).unwrap_err();
    assert!(
        matches!(err, TeacherError::Weights(WeightError::Io { .. })),
        "{err:?}"
    );
    assert!(err.to_string().contains("config.json"), "{err}");
}

#[test]
fn teacher_selects_layers() {
    let device = Device::flex();
    let reference = reference();
    let model = Hubert::load(fixture_dir(), &device).unwrap();
    let samples = reference.wave_shape[1];
    let first = &reference.wave[..samples];
    let frames = reference.hidden_states[0].0[1];
    let dim = reference.hidden_states[0].0[2];
    // Batch row 0 of each reference hidden state.
    let row0: Vec<&[f32]> = reference
        .hidden_states
        .iter()
        .map(|(_, v)| &v[..frames * dim])
        .collect();

    let teacher = HubertTeacher::new(model.clone(), LayerSelection::Index(2)).unwrap();
    assert_eq!(teacher.sample_rate(), 16000);
    assert_eq!(teacher.frame_rate(), 50.0);
    assert_eq!(teacher.dim(), dim);
    assert_eq!(teacher.num_frames(samples), frames);
    let features = teacher.features(first).unwrap();
    assert_eq!(features.dims(), [frames, dim]);
    assert!(max_abs_diff(&values(features), row0[2]) <= TOLERANCE);

    let teacher = HubertTeacher::new(model.clone(), LayerSelection::MeanOfAll).unwrap();
    let mean: Vec<f32> = (0..frames * dim)
        .map(|j| row0.iter().map(|h| h[j]).sum::<f32>() / row0.len() as f32)
        .collect();
    let features = values(teacher.features(first).unwrap());
    assert!(max_abs_diff(&features, &mean) <= TOLERANCE);

    let err = teacher.features(&first[..399]).unwrap_err();
    assert!(
        matches!(
            err,
            TeacherError::WaveTooShort {
                samples: 399,
                min: 400
            }
        ),
        "{err:?}"
    );
    let err = HubertTeacher::new(model, LayerSelection::Index(3)).unwrap_err();
    assert!(
        matches!(
            err,
            TeacherError::LayerOutOfRange {
                layer: 3,
                available: 3
            }
        ),
        "{err:?}"
    );
}

/// Whether `name` matches a [`KEY_MAP`] pattern, where `{…}` stands for one or more characters
/// other than `.`.
fn matches_pattern(pattern: &str, name: &str) -> bool {
    match pattern.find('{') {
        None => pattern == name,
        Some(start) => {
            let end = pattern[start..]
                .find('}')
                .map_or(pattern.len(), |e| start + e + 1);
            let (literal, rest) = (&pattern[..start], &pattern[end..]);
            let Some(tail) = name.strip_prefix(literal) else {
                return false;
            };
            (1..=tail.len())
                .take_while(|&n| !tail[..n].contains('.'))
                .any(|n| matches_pattern(rest, &tail[n..]))
        }
    }
}

#[test]
fn key_map_covers_the_checkpoint() {
    let entries = [BASE, LARGE]
        .iter()
        .flat_map(|f| read_entries(&fixture(f).join("model.safetensors")));
    for (name, _, _) in &entries.collect::<Vec<_>>() {
        let known = KEY_MAP.iter().any(|(hf, _)| matches_pattern(hf, name))
            || voxspec_teacher::hubert::IGNORED.contains(&name.as_str());
        assert!(known, "{name} is not in KEY_MAP");
    }
    assert!(!matches_pattern(
        "encoder.layers.{l}.layer_norm.{wb}",
        "encoder.layers.0.x.layer_norm.weight"
    ));
}
