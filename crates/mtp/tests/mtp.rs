//! The MTP model: cached decoding equals the full forward, targets sit where the paper puts
//! them, training through the shared loop teaches every head, and bad input is refused.

use burn::tensor::{Device, Int, Tensor, TensorData};
use voxspec_data::{BucketConfig, Codes, TtsItem};
use voxspec_infer::{LanguageModel, LogitsRequest};
use voxspec_mtp::{
    BatchItem, MtpConfig, MtpData, MtpModel, MtpTask, MtpTaskConfig, TtsPrompt, host_batch,
};
use voxspec_train::{LrSchedule, OptimConfig, TrainConfig, Trainer};

const TEXT_VOCAB: usize = 12;
const CODEBOOK: usize = 10;

fn model() -> MtpModel {
    let device = Device::flex();
    device.seed(3);
    MtpConfig::tiny(TEXT_VOCAB, CODEBOOK)
        .init(&device)
        .expect("valid config")
}

fn values<const D: usize>(t: Tensor<D>) -> Vec<f32> {
    t.into_data().try_into_vec::<f32>().expect("f32")
}

fn ids_tensor(ids: &[u32]) -> Tensor<2, Int> {
    let v: Vec<i64> = ids.iter().map(|&i| i64::from(i)).collect();
    Tensor::from_data(TensorData::new(v, [1, ids.len()]), &Device::flex())
}

/// Logits of every head at every position of one sequence, from the full forward:
/// `[time][head][vocab]`.
fn full_logits(model: &MtpModel, ids: &[u32]) -> Vec<Vec<Vec<f32>>> {
    let heads = model.forward(ids_tensor(ids), None).expect("forward");
    let vocab = CODEBOOK + 1;
    let per_head: Vec<Vec<f32>> = heads.into_iter().map(values).collect();
    (0..ids.len())
        .map(|t| {
            per_head
                .iter()
                .map(|h| h[t * vocab..(t + 1) * vocab].to_vec())
                .collect()
        })
        .collect()
}

fn assert_close(a: &[f32], b: &[f32], what: &str) {
    let max = a
        .iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    assert!(max < 1e-4, "{what}: max abs diff {max}");
}

#[test]
// `h` indexes the cached logits (`row(b, p, h)`) and the full ones alike.
#[allow(clippy::needless_range_loop)]
fn cached_ragged_decoding_equals_full_forward() {
    let model = model();
    let heads = model.n_heads();
    let prompts = [
        TtsPrompt {
            text: vec![3, 4, 5],
            codes: vec![1, 2],
            durations: None,
        },
        TtsPrompt {
            text: vec![7],
            codes: vec![9, 9, 0, 4],
            durations: None,
        },
    ];
    // Continuations fed in ragged blocks: sequence 0 gets 3 then 1 code, sequence 1 gets 1 then 2.
    let blocks = [vec![vec![5, 6, 7], vec![8]], vec![vec![2, 3], vec![1]]];
    let mut cache = model.new_cache(2, 32).expect("cache");
    let first = model
        .prefill(&mut cache, &prompts, LogitsRequest::heads_at_last(heads))
        .expect("prefill");
    let second = model
        .extend(
            &mut cache,
            &blocks[0],
            LogitsRequest {
                heads,
                last_only: false,
            },
        )
        .expect("extend");
    let third = model
        .extend(&mut cache, &blocks[1], LogitsRequest::heads_at_last(heads))
        .expect("extend");

    for (b, prompt) in prompts.iter().enumerate() {
        let mut codes = prompt.codes.clone();
        codes.extend(&blocks[0][b]);
        codes.extend(&blocks[1][b]);
        let ids = model.prefix_ids(&prompt.text, &codes).expect("ids");
        let full = full_logits(&model, &ids);
        let prefix_len = prompt.text.len() + 1 + prompt.codes.len();
        assert_eq!(model.cache_len(&cache, b), ids.len());
        for h in 0..heads {
            assert_close(first.row(b, 0, h), &full[prefix_len - 1][h], "prefill");
            for (p, _) in blocks[0][b].iter().enumerate() {
                assert_close(
                    second.row(b, p, h),
                    &full[prefix_len + p][h],
                    "extend block",
                );
            }
            assert_close(third.row(b, 0, h), &full[ids.len() - 1][h], "last position");
        }
    }
}

#[test]
fn truncate_then_extend_equals_never_extended() {
    let model = model();
    let prompt = TtsPrompt {
        text: vec![1, 2],
        codes: vec![3],
        durations: None,
    };
    let mut cache = model.new_cache(1, 32).expect("cache");
    model
        .prefill(
            &mut cache,
            std::slice::from_ref(&prompt),
            LogitsRequest::next_token(),
        )
        .expect("prefill");
    let len = model.cache_len(&cache, 0);
    model
        .extend(&mut cache, &[vec![4, 5, 6]], LogitsRequest::next_token())
        .expect("extend");
    model.truncate(&mut cache, 0, len + 1).expect("truncate"); // keep code 4 only
    let after = model
        .extend(&mut cache, &[vec![7]], LogitsRequest::next_token())
        .expect("extend");
    let ids = model.prefix_ids(&prompt.text, &[3, 4, 7]).expect("ids");
    let full = full_logits(&model, &ids);
    assert_close(
        after.row(0, 0, 0),
        &full[ids.len() - 1][0],
        "after rollback",
    );
}

#[test]
fn targets_follow_the_paper_layout() {
    let config = MtpConfig::tiny(TEXT_VOCAB, CODEBOOK).with_n_heads(3);
    let text = [5u32, 6];
    let codes = [1u32, 2, 3];
    let host = host_batch(
        &config,
        &[BatchItem {
            text: &text,
            codes: &codes,
            durations: None,
        }],
    )
    .expect("batch");
    let (ids, targets, weights, tokens, [b, w]) = (
        host.ids,
        host.targets,
        host.weights,
        host.tokens,
        host.shape,
    );
    assert_eq!((b, w), (1, 6));
    let code = |c: u32| i64::from(config.code_id(c));
    assert_eq!(
        ids,
        vec![5, 6, i64::from(config.sep_id()), code(1), code(2), code(3)]
    );
    assert_eq!(tokens, 4);
    let eos = i64::from(config.eos());
    let row = |i: usize| &targets[i * w..(i + 1) * w];
    let mask = |i: usize| &weights[i * w..(i + 1) * w];
    // head 0 at SEP predicts c_0; at c_{T-1} predicts EOS
    assert_eq!(row(0), &[0, 0, 1, 2, 3, eos]);
    assert_eq!(mask(0), &[0., 0., 1., 1., 1., 1.]);
    // head 2 at SEP predicts c_2 = 3, at c_0 predicts EOS, nothing later
    assert_eq!(row(2), &[0, 0, 3, eos, 0, 0]);
    assert_eq!(mask(2), &[0., 0., 1., 1., 0., 0.]);
}

#[test]
fn bad_input_is_refused_with_names() {
    let model = model();
    let err = model.prefix_ids(&[], &[1]).unwrap_err().to_string();
    assert!(err.contains("no tokens"), "{err}");
    let err = model
        .prefix_ids(&[TEXT_VOCAB as u32], &[])
        .unwrap_err()
        .to_string();
    assert!(err.contains("text token 12"), "{err}");
    let err = model.code_ids(&[CODEBOOK as u32]).unwrap_err().to_string();
    assert!(err.contains("code token 10"), "{err}");
    let config = MtpConfig::tiny(TEXT_VOCAB, CODEBOOK);
    let empty = BatchItem {
        text: &[],
        codes: &[1],
        durations: None,
    };
    assert!(host_batch(&config, &[empty]).is_err());
}

/// Codes that step by +1 (mod the codebook) are predictable any number of steps ahead: training
/// must bring every head's loss far below chance (ln 11 ≈ 2.4).
#[test]
fn training_teaches_every_head() {
    let config = MtpConfig::tiny(TEXT_VOCAB, CODEBOOK);
    let items: Vec<TtsItem> = (0..16u32)
        .map(|i| {
            let len = 8 + (i as usize % 5);
            let start = i % CODEBOOK as u32;
            let codes: Vec<u32> = (0..len as u32)
                .map(|j| (start + j) % CODEBOOK as u32)
                .collect();
            TtsItem {
                id: format!("u{i}"),
                speaker: "s".into(),
                text: vec![1 + (i % 5), 2],
                codes: Codes::new(1, len, codes).expect("codes"),
                durations: None,
            }
        })
        .collect();
    let bucket = BucketConfig {
        max_items: 8,
        max_padded_len: 1024,
        shuffle: true,
        seed: 1,
    };
    let task = MtpTask {
        model: config.clone(),
        task: MtpTaskConfig {
            head_weights: vec![1.0; config.n_heads],
            bucket: bucket.clone(),
            code_noise: 0.0,
        },
        train: MtpData::new(&items, &config, bucket),
        valid: None,
    };
    let train = TrainConfig {
        seed: 5,
        max_steps: 120,
        optimizer: OptimConfig {
            lr: 3e-3,
            warmup_steps: 10,
            schedule: LrSchedule::Cosine {
                decay_steps: 120,
                min_lr: 3e-4,
            },
            ..OptimConfig::default()
        },
        log_every: 1,
        checkpoint_every: 0,
        tensorboard: false,
        ..TrainConfig::default()
    };
    let dir = tempfile::tempdir().expect("tempdir");
    let trainer = Trainer::new(train, task, dir.path(), &Device::flex());
    trainer.run(&mut ()).expect("training runs");
    let records = voxspec_train::read_metrics(&dir.path().join("metrics.jsonl")).expect("metrics");
    let last = records.last().expect("a record");
    for h in 0..config.n_heads {
        let ce = last.values[&format!("head{h}")];
        assert!(ce < 0.8, "head {h} cross-entropy {ce} after training");
    }
}

#[test]
fn code_embeddings_are_the_code_rows_and_a_zero_row_for_eos() {
    let model = model();
    let (table, rows, d) = model.code_embeddings().expect("table");
    assert_eq!(rows, model.codebook_size() + 1);
    assert_eq!(table.len(), rows * d);
    let weight: Vec<f32> = model
        .embedding
        .weight
        .val()
        .into_data()
        .try_into_vec()
        .expect("weights");
    let first_code = model.text_vocab() + 1;
    for c in 0..model.codebook_size() {
        let want = &weight[(first_code + c) * d..(first_code + c + 1) * d];
        assert_eq!(&table[c * d..(c + 1) * d], want, "code {c}");
    }
    assert!(table[(rows - 1) * d..].iter().all(|&v| v == 0.0));
}

#[test]
fn forward_costs_time_every_block_width() {
    let model = model();
    let costs = voxspec_mtp::forward_costs(&model, false, 12, 3, 2).expect("costs");
    assert_eq!(costs.len(), 3);
    assert!(costs.iter().all(|c| c.is_finite() && *c > 0.0), "{costs:?}");
    assert!(voxspec_mtp::forward_costs(&model, false, 12, 0, 2).is_err());
}

#[test]
fn code_noise_replaces_a_share_of_input_codes_and_nothing_else() {
    use voxspec_train::BatchSource;
    let config = MtpConfig::tiny(TEXT_VOCAB, 200);
    let items: Vec<TtsItem> = (0..8u32)
        .map(|i| {
            let codes: Vec<u32> = (0..150u32).map(|j| (i * 7 + j) % 200).collect();
            TtsItem {
                id: format!("u{i}"),
                speaker: "s".into(),
                text: vec![1 + (i % 5), 2, 3],
                codes: Codes::new(1, codes.len(), codes).expect("codes"),
                durations: None,
            }
        })
        .collect();
    let bucket = BucketConfig {
        max_items: 8,
        max_padded_len: 4096,
        shuffle: false,
        seed: 1,
    };
    let device = Device::flex();
    let ints = |t: Tensor<2, Int>| t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
    let ints3 = |t: Tensor<3, Int>| t.into_data().convert::<i64>().try_to_vec::<i64>().unwrap();
    let clean = MtpData::new(&items, &config, bucket.clone());
    let noisy = MtpData::new(&items, &config, bucket).with_code_noise(0.3);
    let a = clean.batch(0, 0, &device).unwrap();
    let b = noisy.batch(0, 0, &device).unwrap();
    assert_eq!(ints3(a.targets.clone()), ints3(b.targets.clone()));
    let (ia, ib) = (ints(a.ids.clone()), ints(b.ids.clone()));
    let width = a.ids.dims()[1];
    let (mut changed, mut codes) = (0usize, 0usize);
    for row in 0..a.ids.dims()[0] {
        // text and separator untouched
        assert_eq!(
            ia[row * width..row * width + 4],
            ib[row * width..row * width + 4]
        );
        for j in row * width + 4..row * width + 4 + 150 {
            codes += 1;
            changed += usize::from(ia[j] != ib[j]);
            let id = ib[j] as usize;
            assert!(
                (config.code_id(0) as usize..config.code_id(199) as usize + 1).contains(&id),
                "{id}"
            );
        }
    }
    // 30 % drawn, of which 1/200 land on the true code
    let share = changed as f64 / codes as f64;
    assert!((0.26..0.34).contains(&share), "{share}");
    // deterministic per (epoch, batch), different across epochs
    assert_eq!(ints(noisy.batch(0, 0, &device).unwrap().ids), ib);
    assert_ne!(ints(noisy.batch(1, 0, &device).unwrap().ids), ib);
}
