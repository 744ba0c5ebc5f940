# Renames applied to prost-build's output by gen.sh (perl -0777 -p): the
# oneof enums and the nested message that prost names after their field
# (`Value`, `Dim`, `Tensor`) get names of their own, so that no two public
# types of the engine crate share a name. Each rename changes the path
# (`module::Old`, also inside the `#[prost(oneof = "...")]` strings) and the
# definition inside its module; the wire format does not depend on them.
s/\bsimple_sharded_dim_proto::Dim\b/simple_sharded_dim_proto::ShardedDim/g;
s/(pub mod simple_sharded_dim_proto \{.*?pub enum )Dim\b/${1}ShardedDim/s;
s/\bdimension::Value\b/dimension::DimensionValue/g;
s/(pub mod dimension \{.*?pub enum )Value\b/${1}DimensionValue/s;
s/\btype_proto::Value\b/type_proto::TypeValue/g;
s/(pub mod type_proto \{.*?pub enum )Value\b/${1}TypeValue/s;
s/\btype_proto::Tensor\b/type_proto::TensorTypeProto/g;
s/(pub mod type_proto \{.*?pub struct )Tensor\b/${1}TensorTypeProto/s;
s/\bTensorType\(Tensor\)/TensorType(TensorTypeProto)/g;
