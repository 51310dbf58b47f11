#!/usr/bin/env python3
"""verl_reference.py — golden values for verl_parity_test.cpp, from verl's own formulas in torch.

verl's functions (verl/trainer/ppo/core_algos.py and verl/utils/torch_functional.py, 2026-01,
commit b178a3c) restated op for op in torch — the same operations in the same order on the same
dtypes, so the low bits (float32 counts of integer masks, float32 Bessel factors, float32 group-of-one
statistics) come out as verl's do. Nothing here imports verl or hybridscope.

Regenerate the header the test includes (torch from the project's venv):
    /root/.local/share/hybridscope/venv/bin/python tests/trainer/rl/verl_reference.py \
        > tests/trainer/rl/verl_golden.h
"""
from collections import defaultdict

import torch

BS, T = 5, 6

# ---------------------------------------------------------------- verl_F (torch_functional.py)

def masked_sum(values, mask, axis=None):
    valid_values = torch.where(mask.bool(), values, 0.0)
    return (valid_values * mask).sum(axis=axis)


def masked_mean(values, mask, axis=None):
    s = masked_sum(values, mask, axis)
    return s / (mask.sum(axis=axis) + 1e-8)


def masked_var(values, mask, unbiased=True):
    mean = masked_mean(values, mask)
    centered_values = values - mean
    variance = masked_mean(centered_values**2, mask)
    if unbiased:
        mask_sum = mask.sum()
        bessel_correction = mask_sum / (mask_sum - 1)
        variance = variance * bessel_correction
    return variance


def masked_whiten(values, mask, shift_mean=True):
    mean, var = masked_mean(values, mask), masked_var(values, mask)
    whitened = (values - mean) * torch.rsqrt(var + 1e-8)
    if not shift_mean:
        whitened += mean
    return whitened

# ---------------------------------------------------------------- core_algos.py

def agg_loss(loss_mat, loss_mask, loss_agg_mode, dp_size=1, batch_num_tokens=None, global_batch_size=None,
             loss_scale_factor=None):
    if loss_agg_mode == "token-mean":
        if batch_num_tokens is None:
            batch_num_tokens = loss_mask.sum()
        return masked_sum(loss_mat, loss_mask) / batch_num_tokens * dp_size
    if loss_agg_mode == "seq-mean-token-sum":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        seq_mask = (torch.sum(loss_mask, dim=-1) > 0).float()
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        return masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
    if loss_agg_mode == "seq-mean-token-mean":
        seq_mask = torch.sum(loss_mask, dim=-1)
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1) / (seq_mask + 1e-8)
        seq_mask = (seq_mask > 0).float()
        if global_batch_size is None:
            global_batch_size = seq_mask.sum()
        return masked_sum(seq_losses, seq_mask) / global_batch_size * dp_size
    if loss_agg_mode == "seq-mean-token-sum-norm":
        seq_losses = torch.sum(loss_mat * loss_mask, dim=-1)
        if loss_scale_factor is None:
            loss_scale_factor = loss_mask.shape[-1]
        return torch.sum(seq_losses) / loss_scale_factor
    raise ValueError(loss_agg_mode)


def policy_loss_vanilla(old_log_prob, log_prob, advantages, response_mask, mode, info, lo, hi, c, w=None):
    negative_approx_kl = torch.clamp(log_prob - old_log_prob, min=-20.0, max=20.0)
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - lo, 1 + hi)
    clip_pg_losses1 = torch.maximum(pg_losses1, pg_losses2)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    pg_losses3 = -advantages * c
    clip_pg_losses2 = torch.min(pg_losses3, clip_pg_losses1)
    pg_clipfrac_lower = masked_mean(torch.gt(clip_pg_losses1, pg_losses3) * (advantages < 0).float(), response_mask)
    pg_losses = torch.where(advantages < 0, clip_pg_losses2, clip_pg_losses1)
    if w is not None:
        pg_losses = pg_losses * w
    pg_loss = agg_loss(pg_losses, response_mask, mode, **info)
    return pg_loss, pg_clipfrac, ppo_kl, pg_clipfrac_lower


def policy_loss_gspo(old_log_prob, log_prob, advantages, response_mask, info, lo, hi):
    negative_approx_kl = log_prob - old_log_prob
    seq_lengths = torch.sum(response_mask, dim=-1).clamp(min=1)
    negative_approx_kl_seq = torch.sum(negative_approx_kl * response_mask, dim=-1) / seq_lengths
    log_seq_importance_ratio = log_prob - log_prob.detach() + negative_approx_kl_seq.detach().unsqueeze(-1)
    log_seq_importance_ratio = torch.clamp(log_seq_importance_ratio, max=10.0)
    seq_importance_ratio = torch.exp(log_seq_importance_ratio)
    pg_losses1 = -advantages * seq_importance_ratio
    pg_losses2 = -advantages * torch.clamp(seq_importance_ratio, 1 - lo, 1 + hi)
    pg_losses = torch.maximum(pg_losses1, pg_losses2)
    pg_loss = agg_loss(pg_losses, response_mask, "seq-mean-token-mean", **info)
    pg_clipfrac = masked_mean(torch.gt(pg_losses2, pg_losses1).float(), response_mask)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    return pg_loss, pg_clipfrac, ppo_kl


def policy_loss_gpg(log_prob, advantages, response_mask, mode, info):
    return agg_loss(-log_prob * advantages, response_mask, mode, **info)


def policy_loss_clip_cov(old_log_prob, log_prob, advantages, response_mask, mode, info, lo, hi, ratio_, lb, ub):
    negative_approx_kl = log_prob - old_log_prob
    ratio = torch.exp(negative_approx_kl)
    ppo_kl = masked_mean(-negative_approx_kl, response_mask)
    pg_losses1 = -advantages * ratio
    corr = torch.ones_like(advantages)
    pg_losses2 = -advantages * torch.clamp(ratio, 1 - lo, 1 + hi)
    clip_by_origin = (pg_losses2 > pg_losses1) & (response_mask > 0)
    cov_all = (advantages - masked_mean(advantages, response_mask)) * (
        log_prob - masked_mean(log_prob.detach(), response_mask))
    cov_all[response_mask == 0] = -torch.inf
    cov_all[clip_by_origin] = -torch.inf
    clip_num = max(int(ratio_ * response_mask.sum().item()), 1)
    top_k_idx = torch.nonzero((cov_all < ub) & (cov_all > lb) & (response_mask > 0))
    # The cases below keep the candidates within clip_num, so every candidate is cut whatever
    # torch.randperm draws (verl's randomness does not enter the golden values).
    assert len(top_k_idx) <= clip_num, (len(top_k_idx), clip_num)
    corr[top_k_idx[:, 0], top_k_idx[:, 1]] = 0
    pg_clipfrac = masked_mean((corr == 0).float(), response_mask)
    pg_losses = torch.maximum(pg_losses1, pg_losses2) * corr
    return agg_loss(pg_losses, response_mask, mode, **info), pg_clipfrac, ppo_kl, len(top_k_idx)


def policy_loss_kl_cov(old_log_prob, log_prob, advantages, response_mask, mode, info, kl_cov_ratio, ppo_kl_coef):
    negative_approx_kl = log_prob - old_log_prob
    abs_kl = negative_approx_kl.abs()
    ratio = torch.exp(negative_approx_kl)
    ppo_kl_abs = masked_mean(negative_approx_kl.abs(), response_mask)
    pg_losses1 = -advantages * ratio
    pg_losses_kl = -advantages * ratio + ppo_kl_coef * abs_kl
    pg_losses = pg_losses1.clone()
    all_valid = response_mask > 0
    all_valid_idx = torch.nonzero(all_valid.reshape(-1), as_tuple=True)[0]
    all_valid_adv = advantages[all_valid].detach().reshape(-1).cpu()
    all_valid_logp = log_prob[all_valid].detach().reshape(-1).cpu()
    cov_lst_all = (all_valid_adv - all_valid_adv.mean()) * (all_valid_logp - all_valid_logp.mean())
    k_percent_nums = max(1, int(len(cov_lst_all) * kl_cov_ratio))
    large_cov_idxs = all_valid_idx[torch.topk(cov_lst_all, k_percent_nums, largest=True).indices]
    rows, cols = large_cov_idxs // advantages.shape[1], large_cov_idxs % advantages.shape[1]
    pg_losses[rows, cols] = pg_losses_kl[rows, cols]
    return agg_loss(pg_losses, response_mask, mode, **info), ppo_kl_abs


def value_loss(vpreds, returns, values, response_mask, cliprange_value, mode, info):
    vpredclipped = torch.max(torch.min(vpreds, values + cliprange_value), values - cliprange_value)
    vf_losses1 = (vpreds - returns) ** 2
    vf_losses2 = (vpredclipped - returns) ** 2
    clipped_vf_losses = torch.max(vf_losses1, vf_losses2)
    vf_loss = 0.5 * agg_loss(clipped_vf_losses, response_mask, mode, **info)
    vf_clipfrac = masked_mean(torch.gt(vf_losses2, vf_losses1).float(), response_mask)
    return vf_loss, vf_clipfrac


def gae(token_level_rewards, values, response_mask, gamma, lam):
    nextvalues = 0
    lastgaelam = 0
    advantages_reversed = []
    gen_len = token_level_rewards.shape[-1]
    for t in reversed(range(gen_len)):
        delta = token_level_rewards[:, t] + gamma * nextvalues - values[:, t]
        lastgaelam_ = delta + gamma * lam * lastgaelam
        nextvalues = values[:, t] * response_mask[:, t] + (1 - response_mask[:, t]) * nextvalues
        lastgaelam = lastgaelam_ * response_mask[:, t] + (1 - response_mask[:, t]) * lastgaelam
        advantages_reversed.append(lastgaelam)
    advantages = torch.stack(advantages_reversed[::-1], dim=1)
    returns = advantages + values
    return masked_whiten(advantages, response_mask), returns


def grpo(token_level_rewards, response_mask, index, epsilon=1e-6, norm=True):
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2mean, id2std = defaultdict(list), {}, {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2mean[idx], id2std[idx] = torch.tensor(0.0), torch.tensor(1.0)
        else:
            st = torch.stack(id2score[idx])
            id2mean[idx], id2std[idx] = torch.mean(st), torch.std(st)
    for i in range(scores.shape[0]):
        if norm:
            scores[i] = (scores[i] - id2mean[index[i]]) / (id2std[index[i]] + epsilon)
        else:
            scores[i] = scores[i] - id2mean[index[i]]
    return scores.unsqueeze(-1) * response_mask


def grpo_passk(token_level_rewards, response_mask, index, epsilon=1e-6, norm=True):
    scores = token_level_rewards.sum(dim=-1)
    advantages = torch.zeros_like(scores)
    id2scores, id2indices = defaultdict(list), defaultdict(list)
    for i in range(scores.shape[0]):
        id2scores[index[i]].append(scores[i])
        id2indices[index[i]].append(i)
    for idx in id2scores:
        rewards = torch.stack(id2scores[idx])
        topk, topk_idx = torch.topk(rewards, 2)
        advantage = topk[0] - topk[1]
        if norm:
            advantage = advantage / (torch.std(rewards) + epsilon)
        advantages[id2indices[idx][topk_idx[0].item()]] = advantage
    return advantages.unsqueeze(-1) * response_mask


def rloo(token_level_rewards, response_mask, index):
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2mean = defaultdict(list), {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        id2mean[idx] = torch.tensor(0.0) if len(id2score[idx]) == 1 else torch.mean(torch.stack(id2score[idx]))
    for i in range(scores.shape[0]):
        n = len(id2score[index[i]])
        if n > 1:
            scores[i] = scores[i] * n / (n - 1) - id2mean[index[i]] * n / (n - 1)
    return scores.unsqueeze(-1) * response_mask


def opo(token_level_rewards, response_mask, index):
    response_length = response_mask.sum(dim=-1)
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2len, id2bsl = defaultdict(list), defaultdict(list), {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
        id2len[index[i]].append(response_length[i])
    for idx in id2score:
        if len(id2score[idx]) == 1:
            id2bsl[idx] = torch.tensor(0.0)
        else:
            st, lt = torch.stack(id2score[idx]), torch.stack(id2len[idx])
            id2bsl[idx] = (lt * st).sum() / lt.sum()
    for i in range(scores.shape[0]):
        scores[i] = scores[i] - id2bsl[index[i]]
    return scores.unsqueeze(-1) * response_mask


def gpg_adv(token_level_rewards, response_mask, index, f_norm=1.0):
    scores = token_level_rewards.sum(dim=-1)
    bsz = scores.shape[0]
    alpha = bsz / torch.count_nonzero(scores).clamp(min=1)
    id2score, id2mean = defaultdict(list), {}
    for i in range(bsz):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        id2mean[idx] = torch.tensor(0.0) if len(id2score[idx]) == 1 else torch.mean(torch.stack(id2score[idx]))
    for i in range(bsz):
        scores[i] = alpha * (scores[i] - id2mean[index[i]]) / f_norm
    return scores.unsqueeze(-1) * response_mask


def reinforce_pp(token_level_rewards, response_mask, gamma):
    returns = torch.zeros_like(token_level_rewards)
    running_return = 0
    for t in reversed(range(token_level_rewards.shape[1])):
        running_return = token_level_rewards[:, t] + gamma * running_return
        returns[:, t] = running_return
        running_return = running_return * response_mask[:, t]
    return masked_whiten(returns, response_mask) * response_mask, returns


def reinforce_pp_baseline(token_level_rewards, response_mask, index):
    response_length = token_level_rewards.shape[-1]
    scores = token_level_rewards.sum(dim=-1)
    id2score, id2mean = defaultdict(list), {}
    for i in range(scores.shape[0]):
        id2score[index[i]].append(scores[i])
    for idx in id2score:
        id2mean[idx] = torch.tensor(0.0) if len(id2score[idx]) == 1 else torch.mean(torch.stack(id2score[idx]))
    for i in range(scores.shape[0]):
        scores[i] = scores[i] - id2mean[index[i]]
    scores = scores.unsqueeze(-1).tile([1, response_length]) * response_mask
    return masked_whiten(scores, response_mask) * response_mask

# ---------------------------------------------------------------- the cases


def inputs():
    g = torch.Generator().manual_seed(17)
    u = lambda lo, hi: lo + (hi - lo) * torch.rand(BS, T, generator=g, dtype=torch.float64)
    lengths = [6, 3, 1, 5, 4]  # ragged; row 2 has a single valid token
    mask = torch.tensor([[1.0 if t < n else 0.0 for t in range(T)] for n in lengths], dtype=torch.float64)
    d = {
        "mask": mask,
        "values": u(-2, 3),
        "old_log_prob": u(-3, -0.1),
        "delta": u(-0.4, 0.4),
        "advantages": u(-1.5, 1.5),
        "returns": u(-1, 2),
        "old_values": u(-1, 2),
        "weights": u(0.2, 2.0),
        "rewards": u(-1, 1),
    }
    d["log_prob"] = d["old_log_prob"] + d["delta"]
    d["vpreds"] = d["old_values"] + u(-1, 1)
    # Outcome rewards: the score on the last valid token; a NaN in padding would be dropped by masked_sum only,
    # so the values matrix carries one in a masked slot for the masked_* checks.
    d["values_nan"] = d["values"].clone()
    d["values_nan"][2, 4] = float("nan")
    return d


INDEX = [0, 0, 1, 2, 2]  # uid 1 is a group of one
INFO = dict(dp_size=2, batch_num_tokens=37, global_batch_size=7, loss_scale_factor=11)
MODES = ["token-mean", "seq-mean-token-sum", "seq-mean-token-mean", "seq-mean-token-sum-norm"]


def flat(t):
    return [float(x) for x in torch.as_tensor(t).detach().to(torch.float64).reshape(-1)]


def main():
    d = inputs()
    out = {}
    for name in ["mask", "values", "old_log_prob", "log_prob", "advantages", "returns", "old_values", "vpreds",
                 "weights", "rewards"]:
        out[f"input/{name}"] = flat(d[name])
    for dt_name, dt in [("f64", torch.float64), ("f32", torch.float32)]:
        x = {k: v.to(dt) for k, v in d.items() if k != "mask"}
        for mk_name, mask in [("float", d["mask"].to(dt)), ("int64", d["mask"].to(torch.int64)),
                              ("bool", d["mask"].to(torch.bool))]:
            p = f"{dt_name}/{mk_name}/"
            v = x["values_nan"]
            out[p + "masked_sum"] = flat(masked_sum(v, mask))
            out[p + "masked_sum_row"] = flat(masked_sum(v, mask, -1))
            out[p + "masked_sum_col"] = flat(masked_sum(v, mask, 0))
            out[p + "masked_mean"] = flat(masked_mean(v, mask))
            out[p + "masked_mean_row"] = flat(masked_mean(v, mask, -1))
            out[p + "masked_mean_col"] = flat(masked_mean(v, mask, 0))
            out[p + "masked_var"] = flat(masked_var(x["values"], mask))
            out[p + "masked_whiten"] = flat(masked_whiten(x["values"], mask))
            for mode in MODES:
                out[p + f"agg_loss/{mode}"] = flat(agg_loss(x["values"], mask, mode))
                out[p + f"agg_loss_global/{mode}"] = flat(agg_loss(x["values"], mask, mode, **INFO))
            for w_name, w in [("", None), ("_is", x["weights"])]:
                for mode in ["token-mean", "seq-mean-token-mean"]:
                    lp = x["log_prob"].clone().requires_grad_(True)
                    loss, cf, kl, cfl = policy_loss_vanilla(x["old_log_prob"], lp, x["advantages"], mask, mode, INFO,
                                                            0.2, 0.28, 3.0, w)
                    loss.backward()
                    out[p + f"vanilla{w_name}/{mode}"] = flat(loss) + flat(cf) + flat(kl) + flat(cfl)
                    out[p + f"vanilla{w_name}/{mode}/grad"] = flat(lp.grad)
            vf_loss, vf_clipfrac = value_loss(x["vpreds"], x["returns"], x["old_values"], mask, 0.5, "token-mean",
                                              INFO)
            out[p + "value_loss"] = flat(vf_loss) + flat(vf_clipfrac)
            lp = x["log_prob"].clone().requires_grad_(True)
            loss, cf, kl = policy_loss_gspo(x["old_log_prob"], lp, x["advantages"], mask, INFO, 0.2, 0.28)
            loss.backward()
            out[p + "gspo"] = flat(loss) + flat(cf) + flat(kl)
            out[p + "gspo/grad"] = flat(lp.grad)
            lp = x["log_prob"].clone().requires_grad_(True)
            loss = policy_loss_gpg(lp, x["advantages"], mask, "token-mean", INFO)
            loss.backward()
            out[p + "gpg"] = flat(loss)
            out[p + "gpg/grad"] = flat(lp.grad)
            lp = x["log_prob"].clone().requires_grad_(True)
            loss, cf, kl, n_cut = policy_loss_clip_cov(x["old_log_prob"], lp, x["advantages"], mask, "token-mean",
                                                       INFO, 0.2, 0.28, 0.35, 0.05, 5.0)
            loss.backward()
            out[p + "clip_cov"] = flat(loss) + flat(cf) + flat(kl) + [float(n_cut)]
            out[p + "clip_cov/grad"] = flat(lp.grad)
            lp = x["log_prob"].clone().requires_grad_(True)
            loss, kl = policy_loss_kl_cov(x["old_log_prob"], lp, x["advantages"], mask, "token-mean", INFO, 0.2, 0.1)
            loss.backward()
            out[p + "kl_cov"] = flat(loss) + flat(kl)
            out[p + "kl_cov/grad"] = flat(lp.grad)
            r = x["rewards"]
            if mk_name != "bool":  # verl's GAE computes 1 - mask, which torch refuses for bool
                adv, ret = gae(r, x["old_values"], mask, 0.9, 0.8)
                out[p + "gae"] = flat(adv) + flat(ret)
            out[p + "grpo"] = flat(grpo(r.clone(), mask, INDEX))
            out[p + "grpo_drgrpo"] = flat(grpo(r.clone(), mask, INDEX, norm=False))
            out[p + "rloo"] = flat(rloo(r.clone(), mask, INDEX))
            out[p + "opo"] = flat(opo(r.clone(), mask, INDEX))
            out[p + "gpg_adv"] = flat(gpg_adv(r.clone(), mask, INDEX))
            out[p + "grpo_passk"] = flat(grpo_passk(r.clone(), mask, [0, 0, 1, 1, 1]))
            adv, ret = reinforce_pp(r, mask, 0.9)
            out[p + "reinforce_pp"] = flat(adv) + flat(ret)
            out[p + "reinforce_pp_baseline"] = flat(reinforce_pp_baseline(r.clone(), mask, INDEX))

    print("// verl_golden.h — generated by tests/trainer/rl/verl_reference.py (torch " + torch.__version__ + ");")
    print("// do not edit. Regenerate:")
    print("//   /root/.local/share/hybridscope/venv/bin/python tests/trainer/rl/verl_reference.py \\")
    print("//       > tests/trainer/rl/verl_golden.h")
    print("#pragma once\n\n#include <map>\n#include <string>\n#include <vector>\n")
    print("namespace hs::trainer::verl_golden {\n")
    print("// Keys: input/<name> (float64, (5, 6) row-major) or <f64|f32>/<float|int64|bool mask>/<function>.")
    print("inline const std::map<std::string, std::vector<double>>& values() {")
    print("  static const std::map<std::string, std::vector<double>> table = {")
    for k, vals in out.items():
        body = ", ".join(repr(v) if v == v and abs(v) != float("inf") else "NAN" for v in vals)
        print(f'      {{"{k}", {{{body}}}}},')
    print("  };\n  return table;\n}\n\n}  // namespace hs::trainer::verl_golden")


if __name__ == "__main__":
    main()
