// SPDX-License-Identifier: Apache-2.0
// docs/configuration.md holds the one table of PEERPLAN_* variables that
// users read; this test keeps it true to the code's field table
// (core::config_fields): the same variables, each with its Config field,
// its default and whether every rank must agree on it.
#include <gtest/gtest.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "core/config_fields.hpp"

#ifndef PEERPLAN_CONFIGURATION_DOC
#error "PEERPLAN_CONFIGURATION_DOC must name docs/configuration.md"
#endif

namespace peerplan::core {
namespace {

struct DocRow {
  int line = 0;
  std::string variable, field, accepted, default_value, agreed;
};

std::string trim(const std::string& text) {
  const auto first = text.find_first_not_of(" \t\r");
  if (first == std::string::npos) return "";
  const auto last = text.find_last_not_of(" \t\r");
  return text.substr(first, last - first + 1);
}

std::string without_backticks(std::string text) {
  text.erase(std::remove(text.begin(), text.end(), '`'), text.end());
  return trim(text);
}

// The value before any gloss: "auto (one block per SM)" -> "auto";
// `""` stands for the empty string.
std::string first_token(const std::string& cell) {
  const std::string text = without_backticks(cell);
  std::string token = text.substr(0, text.find_first_of(" \t("));
  return token == "\"\"" ? std::string() : token;
}

std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  std::string inner = trim(line);
  if (inner.size() < 2 || inner.front() != '|' || inner.back() != '|') return cells;
  inner = inner.substr(1, inner.size() - 2);
  std::stringstream stream(inner);
  for (std::string cell; std::getline(stream, cell, '|');) cells.push_back(trim(cell));
  return cells;
}

// The rows of the first table whose header starts "| variable | Config field |".
std::vector<DocRow> read_variable_table(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw std::runtime_error("cannot read " + path);
  std::vector<DocRow> rows;
  bool in_table = false;
  int number = 0;
  for (std::string line; std::getline(in, line);) {
    ++number;
    const auto cells = cells_of(line);
    if (!in_table) {
      in_table = cells.size() == 5 && cells[0] == "variable" && cells[1] == "Config field";
      continue;
    }
    if (cells.empty()) break;  // the table ends at its first non-row line
    if (cells[0].find_first_not_of("-: ") == std::string::npos) continue;  // |---|
    if (cells.size() != 5)
      throw std::runtime_error(path + ":" + std::to_string(number) + ": expected 5 cells, got " +
                               std::to_string(cells.size()));
    rows.push_back({number, without_backticks(cells[0]), first_token(cells[1]), cells[2],
                    first_token(cells[3]), first_token(cells[4])});
  }
  return rows;
}

class ConfigurationDoc : public ::testing::Test {
 protected:
  const std::string path = PEERPLAN_CONFIGURATION_DOC;
  std::vector<DocRow> rows = read_variable_table(path);
  std::vector<ConfigField> fields = config_fields(Config{});

  const DocRow* row_for(const std::string& variable) const {
    const auto it = std::find_if(rows.begin(), rows.end(),
                                 [&](const DocRow& r) { return r.variable == variable; });
    return it == rows.end() ? nullptr : &*it;
  }
  std::string where(const DocRow& row) const {
    return path + ":" + std::to_string(row.line) + " (" + row.variable + ")";
  }
};

TEST_F(ConfigurationDoc, HasTheVariableTable) {
  ASSERT_FALSE(rows.empty()) << path
                             << ": no table with the header "
                                "| variable | Config field | accepted values | default | must "
                                "agree on every rank |";
}

TEST_F(ConfigurationDoc, DocumentsEveryConfigFieldOnce) {
  std::map<std::string, int> seen;
  for (const DocRow& row : rows) ++seen[row.variable];
  for (const ConfigField& field : fields)
    EXPECT_EQ(seen[field.variable], 1)
        << path << ": " << field.variable << " (Config field " << field.name
        << ") must have exactly one row in the variable table";
}

TEST_F(ConfigurationDoc, DocumentsNoVariableTheCodeLacks) {
  for (const DocRow& row : rows) {
    const bool known = std::any_of(fields.begin(), fields.end(), [&](const ConfigField& f) {
      return row.variable == f.variable;
    });
    EXPECT_TRUE(known) << where(row)
                       << ": not a Config field's variable (core::config_fields); "
                          "variables outside Config belong in the table below it";
  }
}

TEST_F(ConfigurationDoc, NamesEachVariablesConfigField) {
  for (const ConfigField& field : fields) {
    if (const DocRow* row = row_for(field.variable)) {
      EXPECT_EQ(row->field, field.name) << where(*row) << ": wrong Config field";
    }
  }
}

TEST_F(ConfigurationDoc, GivesEachDefault) {
  for (const ConfigField& field : fields) {
    if (const DocRow* row = row_for(field.variable)) {
      EXPECT_EQ(row->default_value, field.value)
          << where(*row) << ": the default column's first word must be the value of a default "
          << "Config (write \"\" for an empty string)";
    }
  }
}

TEST_F(ConfigurationDoc, SaysWhichMustAgree) {
  for (const ConfigField& field : fields) {
    if (const DocRow* row = row_for(field.variable)) {
      EXPECT_EQ(row->agreed, field.agreed ? "yes" : "no")
          << where(*row) << ": the must-agree column must be yes or no, as the code's "
          << "agreement check has it";
    }
  }
}

}  // namespace
}  // namespace peerplan::core
