// layer_hooks.h — what the decoder's layer loop tells an observer around each layer: fsdp's
// per-layer units (zero.h, ZeroShards::wrap_layers) gather a layer's parameters before it runs and
// free them after, in the forward and again in the backward.
//
// The backbone (model_layers.h, BackboneImpl::layer_hooks) calls, for decoder layer `layer`
// (its global index, as in model.layers.{layer}):
//   before_forward(layer)   just before the layer's forward;
//   after_forward(layer)    just after it;
//   before_backward(layer)  when the gradient of the layer's output is ready, before the layer's
//                           backward (and before its recomputation under gradient checkpointing);
//   after_backward(layer)   when the gradient of the layer's input is ready: the layer's backward
//                           is done and its parameters' gradients are accumulated.
// The backward calls come from autograd's tensor hooks on the layer boundaries (only when the
// forward ran with autograd), on the thread that runs the backward; one hook per boundary runs
// after_backward(i) then before_backward(i - 1), so a layer is done before the next is gathered.
#pragma once

namespace hs::trainer {

class LayerHooks {
 public:
  virtual ~LayerHooks() = default;
  virtual void before_forward(int layer) = 0;
  virtual void after_forward(int layer) = 0;
  virtual void before_backward(int layer) = 0;
  virtual void after_backward(int layer) = 0;
};

}  // namespace hs::trainer
