// The model factory.
#include "model.hpp"

#include <stdexcept>

#include "mlp.hpp"
#include "transformer.hpp"

namespace trainer {

std::unique_ptr<model> make_model(const model_options& options, int batch_size) {
  if (options.kind == "transformer") return std::make_unique<transformer>(options, batch_size);
  if (options.kind == "mlp") return std::make_unique<mlp>(options, batch_size);
  throw std::invalid_argument("--model must be 'transformer' or 'mlp'; got '" + options.kind + "'");
}

}  // namespace trainer
