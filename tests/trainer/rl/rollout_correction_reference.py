"""Golden values for rollout_correction_test.cpp: verl's rollout correction and off-policy metrics
(verl/trainer/ppo/rollout_corr_helper.py and ray_trainer's training/rollout_probs_diff_*),
re-implemented here with torch from reading verl's code, on the test's fixed inputs.

    /root/.local/share/hybridscope/venv/bin/python tests/trainer/rl/rollout_correction_reference.py

prints the test's expectation tables as C++ (pasted into rollout_correction_test.cpp)."""
import math

import torch

B = 20.0  # SAFETY_BOUND


def msum(v, m, axis=None):
    v = torch.where(m.bool(), v, torch.zeros_like(v))
    return v.sum() if axis is None else v.sum(axis)


def mmean(v, m, axis=None):
    return msum(v, m, axis) / ((m.sum() if axis is None else m.sum(axis)) + 1e-8)


def inputs():
    old = torch.tensor([[-0.10, -1.20, -0.70, -2.00, -0.05],
                        [-0.30, -0.25, -3.00, -0.90, -1.10],
                        [-2.50, -0.02, -0.60, -0.40, -0.80],
                        [-0.05, -0.07, -1.50, -0.20, -0.30]], dtype=torch.float32)
    roll = torch.tensor([[-0.12, -1.00, -0.75, -2.60, -0.04],
                         [-0.28, -0.40, -2.20, -0.95, -1.00],
                         [-2.40, -0.03, -0.62, -0.10, -0.85],
                         [-0.06, -0.05, -9.00, -0.22, -0.31]], dtype=torch.float32)
    mask = torch.tensor([[1, 1, 1, 1, 0],
                         [1, 1, 1, 1, 1],
                         [1, 1, 0, 0, 0],
                         [1, 1, 1, 1, 1]], dtype=torch.float32)
    return old, roll, mask


def weight_metrics(prefix, w, lr_m, mask, seq_level, upper, lower):
    out = {}
    lu = torch.log(torch.tensor(upper, dtype=w.dtype))
    ll = torch.log(torch.tensor(lower, dtype=w.dtype))
    if seq_level:
        out[prefix + "_max"] = torch.exp(torch.clamp(lr_m.max(), max=B)).item()
        out[prefix + "_min"] = torch.exp(lr_m.min()).item()
        out[prefix + "_mean"] = mmean(w, mask).item()
        out[prefix + "_ratio_fraction_high"] = (lr_m > lu).float().mean().item()
        out[prefix + "_ratio_fraction_low"] = (lr_m < ll).float().mean().item()
    else:
        out[prefix + "_mean"] = mmean(w, mask).item()
        out[prefix + "_ratio_fraction_high"] = mmean((w > upper).float(), mask).item()
        out[prefix + "_ratio_fraction_low"] = mmean((w < lower).float(), mask).item()
        mb = mask.bool()
        out[prefix + "_max"] = w.masked_fill(~mb, float("-inf")).max().item()
        out[prefix + "_min"] = w.masked_fill(~mb, float("inf")).min().item()
    wc = w.clamp(min=lower, max=upper)
    if mask.sum() > 1:
        mc = mmean(wc, mask)
        var = mmean(wc.square(), mask) - mc.square()
        out[prefix + "_std"] = torch.sqrt(torch.clamp(var, min=0.0)).item()
    else:
        out[prefix + "_std"] = 0.0
    norm = wc / (mmean(wc, mask) + 1e-8)
    out[prefix + "_eff_sample_size"] = 1.0 / mmean(norm.square(), mask).item()
    sm = mmean(w, mask, -1)
    out[prefix + "_seq_mean"] = sm.mean().item()
    out[prefix + "_seq_std"] = sm.std().item()
    out[prefix + "_seq_max"] = sm.max().item()
    out[prefix + "_seq_min"] = sm.min().item()
    out[prefix + "_seq_max_deviation"] = (sm - 1.0).abs().max().item()
    out[prefix + "_seq_fraction_high"] = (sm > upper).float().mean().item()
    out[prefix + "_seq_fraction_low"] = (sm < lower).float().mean().item()
    return out


def level_ratio(lr, mask, level):
    if level == "token":
        return torch.exp(torch.clamp(lr, -B, B)), lr
    s = (msum(lr, mask, -1) if level == "sequence" else mmean(lr, mask, -1)).unsqueeze(-1)
    return torch.exp(torch.clamp(s, -B, B)).expand_as(lr), s


def correction(old, roll, mask, is_level=None, is_thr=2.0, normalize=False, rs=None, rs_thr=None, rs_lower=None,
               veto=None):
    lr = old - roll
    m = {}
    weights = None
    if is_level:
        w, lrm = level_ratio(lr, mask, is_level)
        w = w * mask
        m.update(weight_metrics("rollout_is", w, lrm, mask, is_level == "sequence", is_thr, 1.0 / is_thr))
        w = w.clamp(max=is_thr)
        if normalize:
            if is_level == "token":
                mean = mmean(w, mask)
            else:
                sw = mmean(w, mask, -1)
                sm = (mask.sum(-1) > 0).to(w.dtype)
                mean = (sw * sm).sum() / sm.sum().clamp_min(1e-8)
            w = w / mean
            m["rollout_is_batch_norm_factor"] = mean.item()
        weights = w
    new_mask = mask.clone()
    if rs:
        lower = rs_lower if rs_lower is not None else 1.0 / rs_thr
        w, lrm = level_ratio(lr, mask, rs)
        keep = ((w >= lower) & (w <= rs_thr)).float()
        m.update(weight_metrics("rollout_rs", w, lrm, mask, rs != "token", rs_thr, lower))
        m["rollout_rs_masked_fraction"] = mmean(1 - keep, mask).item()
        if rs == "token":
            m["rollout_rs_seq_masked_fraction"] = (msum(1 - keep, mask, -1) > 0).float().mean().item()
        else:
            m["rollout_rs_seq_masked_fraction"] = (1 - keep[:, 0]).mean().item()
        new_mask = mask * keep
    if veto:
        cat = (lr < torch.log(torch.tensor(veto))) & mask.bool()
        has = cat.any(dim=-1, keepdim=True)
        m["rollout_is_veto_fraction"] = has.float().mean().item()
        m["rollout_is_catastrophic_token_fraction"] = mmean(cat.float(), mask).item()
        new_mask = new_mask * (~has).float()
    else:
        m["rollout_is_veto_fraction"] = 0.0
        m["rollout_is_catastrophic_token_fraction"] = 0.0
    return weights, new_mask, {"rollout_corr/" + k: v for k, v in m.items()}


def mismatch(old, roll, mask):
    out = {}
    rp, ap = torch.exp(roll), torch.exp(old)
    d = torch.masked_select(torch.abs(rp - ap), mask.bool())
    out["training/rollout_probs_diff_max"] = d.max().item()
    out["training/rollout_probs_diff_mean"] = d.mean().item()
    out["training/rollout_probs_diff_std"] = d.std().item()
    # np.corrcoef's Pearson r, in float64 (numpy is not in the test venv)
    a = [float(x) for x in torch.masked_select(ap, mask.bool()).double()]
    b = [float(x) for x in torch.masked_select(rp, mask.bool()).double()]
    ma, mb = sum(a) / len(a), sum(b) / len(b)
    cov = sum((x - ma) * (y - mb) for x, y in zip(a, b))
    out["training/rollout_actor_probs_pearson_corr"] = cov / math.sqrt(sum((x - ma) ** 2 for x in a) *
                                                                        sum((y - mb) ** 2 for y in b))
    mt = mmean(old, mask, -1)
    out["rollout_corr/training_ppl"] = torch.exp(-mt).mean().item()
    out["rollout_corr/training_log_ppl"] = (-mt).mean().item()
    out["rollout_corr/kl"] = mmean(roll - old, mask).item()
    lr = old - roll
    out["rollout_corr/k3_kl"] = mmean(torch.exp(lr) - lr - 1, mask).item()
    mr = mmean(roll, mask, -1)
    out["rollout_corr/rollout_ppl"] = torch.exp(-mr).mean().item()
    out["rollout_corr/rollout_log_ppl"] = (-mr).mean().item()
    lpd = mr - mt
    out["rollout_corr/log_ppl_diff"] = lpd.mean().item()
    out["rollout_corr/log_ppl_abs_diff"] = lpd.abs().mean().item()
    out["rollout_corr/log_ppl_diff_max"] = lpd.max().item()
    out["rollout_corr/log_ppl_diff_min"] = lpd.min().item()
    out["rollout_corr/ppl_ratio"] = torch.exp(lpd).mean().item()
    rho = torch.exp(torch.clamp(lr, -B, B))
    out["rollout_corr/chi2_token"] = (mmean(rho.square(), mask) - 1.0).item()
    s = torch.clamp(msum(lr, mask, -1), -B, B)
    out["rollout_corr/chi2_seq"] = (torch.exp(2.0 * s).mean() - 1.0).item()
    return out


def emit(name, metrics, weights=None, new_mask=None):
    print(f"const std::vector<std::pair<std::string, double>> {name} = {{")
    for k, v in metrics.items():
        print(f'    {{"{k}", {v!r}}},')
    print("};")
    if weights is not None:
        print(f"const std::vector<double> {name}Weights = {{" + ", ".join(repr(x) for x in weights.flatten().tolist()) + "};")
    if new_mask is not None:
        print(f"const std::vector<double> {name}Mask = {{" + ", ".join(repr(x) for x in new_mask.flatten().tolist()) + "};")


if __name__ == "__main__":
    old, roll, mask = inputs()
    emit("kMismatch", mismatch(old, roll, mask))
    w, nm, m = correction(old, roll, mask, is_level="token", is_thr=2.0, rs="token", rs_thr=1.5, veto=0.5)
    emit("kTokenIsTokenRsVeto", m, w, nm)
    w, nm, m = correction(old, roll, mask, is_level="sequence", is_thr=2.0, normalize=True, rs="geometric", rs_thr=1.5,
                          rs_lower=0.9)
    emit("kSequenceIsNormalizedGeometricRs", m, w, nm)
    w, nm, m = correction(old, roll, mask, rs="sequence", rs_thr=2.0)
    emit("kSequenceRs", m, w, nm)
