// The parsed form of a Jinja template: tokens from the lexer, expressions and statements.
#ifndef TEXTGEN_ENGINE_CHAT_JINJA_AST_H_
#define TEXTGEN_ENGINE_CHAT_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/chat/jinja_value.h"

namespace textgen::jinja {

struct Token {
  enum class Type {
    kData,
    kVarBegin,
    kVarEnd,
    kBlockBegin,
    kBlockEnd,
    kName,
    kString,
    kInt,
    kFloat,
    kOp,
    kEof
  };
  Type type;
  std::string text;  // data, name, operator, or the decoded string literal
  int line = 1;
  int64_t int_value = 0;
  double float_value = 0;
};

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // children
    kTuple,    // children
    kDict,     // children: key, value, key, value, ...
    kGetAttr,  // children[0].name
    kGetItem,  // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]] (null: omitted)
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs)
    kTest,     // children[0] is [not] name(children[1..])
    kNeg,      // -children[0]
    kPos,      // +children[0]
    kNot,      // not children[0]
    kBinary,   // children[0] name children[1]: + - * / // % **
    kAnd,      // children[0] and children[1]
    kOr,       // children[0] or children[1]
    kCompare,  // children[0] ops[0] children[1] ops[1] children[2] ...
    kConcat,   // children joined with ~
    kCond,     // children[1] if children[0] else children[2] (null: Undefined)
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  std::vector<std::string> ops;
  bool negated = false;
};

struct Stmt;
using Body = std::vector<std::unique_ptr<Stmt>>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (condition, body); else_body
    kFor,          // for targets in expr [if cond] body [else else_body]
    kSet,          // set targets = expr; or set targets[0].attr = expr
    kSetBlock,     // set targets[0] %} body {% endset
    kMacro,        // macro name(params) body
    kCallBlock,    // call(params) expr %} body {% endcall  (body is `caller`)
    kFilterBlock,  // filter expr(input: the name "\x01body") %} body {% endfilter
    kScope,        // generation/endgeneration: the body as is
    kBreak,
    kContinue,
  };
  Kind kind;
  int line = 0;
  std::string text;
  std::string name;  // macro name, or the attribute of `set ns.attr`
  ExprPtr expr;
  ExprPtr cond;  // for ... if cond
  std::vector<std::string> targets;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters with defaults
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
};

// The name a filter block's body is bound to while the filter chain runs.
inline constexpr char kFilterBodyName[] = "\x01body";

}  // namespace textgen::jinja

#endif  // TEXTGEN_ENGINE_CHAT_JINJA_AST_H_
