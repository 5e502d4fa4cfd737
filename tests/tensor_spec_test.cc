// The one tensor-spec parser and datatype table (symphony/tensor_spec.hpp),
// shared by serve's config and server, the fronts and cluster.yaml.
#include "symphony/tensor_spec.hpp"

#include <gtest/gtest.h>

namespace symphony {
namespace {

TEST(TensorSpecTest, ParsesDtypeAndShape) {
  Result<TensorSpec> s = parse_tensor_spec("float32[3,224,224]");
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_EQ(s->dtype, DataType::kFp32);
  EXPECT_EQ(s->shape, (std::vector<std::int64_t>{3, 224, 224}));
  EXPECT_EQ(s->elements(), 3u * 224 * 224);
  EXPECT_EQ(s->bytes(), 4u * 3 * 224 * 224);
  EXPECT_EQ(s->to_string(), "float32[3,224,224]");
  Result<TensorSpec> blanks = parse_tensor_spec("  int64 [ 2 , 5 ] ");
  ASSERT_TRUE(blanks.ok()) << blanks.status().to_string();
  EXPECT_EQ(blanks->to_string(), "int64[2,5]");
  Result<TensorSpec> scalar = parse_tensor_spec("bool[]");  // one element per sample
  ASSERT_TRUE(scalar.ok());
  EXPECT_TRUE(scalar->shape.empty());
  EXPECT_EQ(scalar->bytes(), 1u);
}

TEST(TensorSpecTest, AliasesResolveToTheCanonicalName) {
  const std::pair<const char*, const char*> cases[] = {
      {"float[2]", "float32[2]"}, {"double[2]", "float64[2]"}, {"half[2]", "float16[2]"},
      {"long[2]", "int64[2]"},    {"int[2]", "int32[2]"},      {"bfloat16[2]", "bfloat16[2]"},
      {"uint8[2]", "uint8[2]"},   {"int8[2]", "int8[2]"},      {"int16[2]", "int16[2]"}};
  for (const auto& [in, out] : cases) {
    Result<TensorSpec> s = parse_tensor_spec(in);
    ASSERT_TRUE(s.ok()) << in;
    EXPECT_EQ(s->to_string(), out);
  }
}

TEST(TensorSpecTest, ErrorsNameTheTextAndTheProblem) {
  auto message = [](const char* text) {
    Result<TensorSpec> s = parse_tensor_spec(text);
    EXPECT_FALSE(s.ok()) << text;
    return s.ok() ? std::string() : s.status().message();
  };
  EXPECT_NE(message("float32").find("'float32' is not of the form dtype[d1,d2,...]"), std::string::npos);
  EXPECT_NE(message("float32[3").find("is not of the form"), std::string::npos);
  EXPECT_NE(message("complex[3]").find("unknown dtype 'complex'"), std::string::npos);
  EXPECT_NE(message("uint16[3]").find("unknown dtype 'uint16'"), std::string::npos);  // protocol-only
  EXPECT_NE(message("float32[3,0]").find("dimension '0' in 'float32[3,0]' is not a positive integer"),
            std::string::npos);
  EXPECT_NE(message("float32[-1]").find("dimension '-1'"), std::string::npos);
  EXPECT_NE(message("float32[2x]").find("dimension '2x'"), std::string::npos);
  EXPECT_NE(message("uint8[65536,65536]").find("more than 2^30 elements"), std::string::npos);
}

TEST(TensorSpecTest, AWildcardParsesOnlyWhereAllowedAndMatchesAnySize) {
  Result<TensorSpec> s = parse_tensor_spec("int64[-1, 8]", Wildcards::kAllow);
  ASSERT_TRUE(s.ok()) << s.status().to_string();
  EXPECT_TRUE(s->has_wildcard());
  EXPECT_EQ(s->to_string(), "int64[-1,8]");
  EXPECT_FALSE(parse_tensor_spec("int64[2,8]")->has_wildcard());
  EXPECT_NE(parse_tensor_spec("int64[-2]", Wildcards::kAllow).status().message().find("or -1 (any size)"),
            std::string::npos);
  EXPECT_FALSE(parse_tensor_spec("int64[-1]").ok()) << "refused unless allowed";
  const std::vector<std::int64_t> pattern{-1, 8};
  EXPECT_TRUE(shape_matches(pattern, std::vector<std::int64_t>{3, 8}));
  EXPECT_TRUE(shape_matches(pattern, std::vector<std::int64_t>{1, 8}));
  EXPECT_FALSE(shape_matches(pattern, std::vector<std::int64_t>{3, 7}));
  EXPECT_FALSE(shape_matches(pattern, std::vector<std::int64_t>{8}));
  EXPECT_FALSE(shape_matches(pattern, std::vector<std::int64_t>{1, 3, 8}));
}

TEST(TensorSpecTest, OneTableForProtocolNamesSizesAndSpecNames) {
  for (std::size_t i = 0; i < kDataTypes.size(); ++i) {
    const DataTypeInfo& d = kDataTypes[i];
    EXPECT_EQ(static_cast<std::size_t>(d.type), i) << d.protocol;  // indexed by DataType
    EXPECT_EQ(datatype_from_protocol(d.protocol), d.type);
    if (!d.name.empty()) {
      EXPECT_EQ(datatype_from_spec_name(d.name), d.type);
    }
  }
  EXPECT_EQ(datatype_info(DataType::kFp16).protocol, "FP16");
  EXPECT_EQ(datatype_info(DataType::kBf16).bytes, 2u);
  EXPECT_EQ(datatype_info(DataType::kBytes).bytes, 0u);
  EXPECT_EQ(datatype_from_protocol("fp32"), std::nullopt);  // the protocol's names are upper case
  EXPECT_EQ(datatype_from_spec_name("FP32"), std::nullopt);
  EXPECT_EQ(datatype_from_spec_name(""), std::nullopt);
}

}  // namespace
}  // namespace symphony
