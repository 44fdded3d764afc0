// fp8_generate: quantize a trainer checkpoint to FP8, evaluate it and generate text with it.
#include <iostream>

#include "app.hpp"

int main(int argc, char** argv) { return generate::generate_main(argc, argv, std::cout, std::cerr); }
