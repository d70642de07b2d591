// SPDX-License-Identifier: Apache-2.0
// The colours of the memory chart's bands: distinct for any number of sites, apart in OKLab
// (Ottosson's perceptual space, as CSS oklch() uses it) by as much as their number allows.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <vector>

#include "mem_chart.hpp"

namespace gpuplug::tool {

namespace {

struct Lab {
  double l, a, b;
};

using Rgb = std::array<double, 3>;  // linear sRGB, 0..1 when in gamut

double to_linear(double c) { return c <= 0.04045 ? c / 12.92 : std::pow((c + 0.055) / 1.055, 2.4); }
double to_gamma(double c) {
  return c <= 0.0031308 ? 12.92 * c : 1.055 * std::pow(c, 1 / 2.4) - 0.055;
}

Lab oklab(const Rgb& c) {
  const double l = std::cbrt(0.4122214708 * c[0] + 0.5363325363 * c[1] + 0.0514459929 * c[2]);
  const double m = std::cbrt(0.2119034982 * c[0] + 0.6806995451 * c[1] + 0.1073969566 * c[2]);
  const double s = std::cbrt(0.0883024619 * c[0] + 0.2817188376 * c[1] + 0.6299787005 * c[2]);
  return {0.2104542553 * l + 0.7936177850 * m - 0.0040720468 * s,
          1.9779984951 * l - 2.4285922050 * m + 0.4505937099 * s,
          0.0259040371 * l + 0.7827717662 * m - 0.8086757660 * s};
}

Rgb linear_of_oklch(double lightness, double chroma, double hue_degrees) {
  const double h = hue_degrees * 3.14159265358979323846 / 180;
  const double a = chroma * std::cos(h), b = chroma * std::sin(h);
  const double l = std::pow(lightness + 0.3963377774 * a + 0.2158037573 * b, 3);
  const double m = std::pow(lightness - 0.1055613458 * a - 0.0638541728 * b, 3);
  const double s = std::pow(lightness - 0.0894841775 * a - 1.2914855480 * b, 3);
  return {4.0767416621 * l - 3.3077085826 * m + 0.2309598813 * s,
          -1.2684380046 * l + 2.6097574011 * m - 0.3413193965 * s,
          -0.0041960863 * l - 0.7034186147 * m + 1.7076147010 * s};
}

bool in_gamut(const Rgb& c) {
  return std::all_of(c.begin(), c.end(), [](double v) { return v >= 0 && v <= 1; });
}

/// The colour of that lightness and hue with the most chroma up to `chroma` that sRGB can show.
std::string hex_of_oklch(double lightness, double chroma, double hue) {
  Rgb c = linear_of_oklch(lightness, chroma, hue);
  if (!in_gamut(c)) {
    double lo = 0, hi = chroma;
    for (int i = 0; i < 24; ++i) {
      const double mid = (lo + hi) / 2;
      (in_gamut(linear_of_oklch(lightness, mid, hue)) ? lo : hi) = mid;
    }
    c = linear_of_oklch(lightness, lo, hue);
  }
  char buf[8];
  const auto byte = [](double v) {
    return static_cast<unsigned>(std::lround(255 * to_gamma(std::clamp(v, 0.0, 1.0))));
  };
  std::snprintf(buf, sizeof buf, "#%02X%02X%02X", byte(c[0]), byte(c[1]), byte(c[2]));
  return buf;
}

Lab oklab_of_hex(const std::string& hex) {
  Rgb c{};
  for (int i = 0; i < 3; ++i)
    c[i] = to_linear(std::stoi(hex.substr(1 + 2 * i, 2), nullptr, 16) / 255.0);
  return oklab(c);
}

double distance(const Lab& x, const Lab& y) { return std::hypot(x.l - y.l, x.a - y.a, x.b - y.b); }

// Okabe and Ito's qualitative palette: told apart with every common colour-vision deficiency.
constexpr const char* okabe_ito[] = {"#0072B2", "#E69F00", "#009E73", "#CC79A7",
                                     "#56B4E9", "#D55E00", "#F0E442", "#999999"};

// Past this many colours, a candidate is compared with the last ones only (the page stays quick
// with thousands of sites); it is still never one already chosen.
constexpr std::size_t compared = 256;

}  // namespace

std::vector<std::string> band_colours(std::size_t n) {
  std::vector<std::string> out;
  std::vector<Lab> labs;
  std::set<std::string> chosen;
  for (const char* c : okabe_ito) {
    if (out.size() == n) return out;
    out.push_back(c);
    labs.push_back(oklab_of_hex(c));
    chosen.insert(c);
  }
  double threshold = 0.08;
  std::size_t k = 0;  // the candidate: hue k times the golden angle, lightness by k mod 3
  while (out.size() < n) {
    for (int tries = 0;; ++tries, ++k) {
      if (tries == 64) {  // no hue this far from all: settle for less (still never a repeat)
        threshold *= 0.8;
        tries = 0;
      }
      constexpr double lightness[] = {0.55, 0.70, 0.82};
      const std::string c =
          hex_of_oklch(lightness[k % 3], 0.15, std::fmod(static_cast<double>(k) * 137.50776, 360));
      if (chosen.count(c) != 0) continue;
      const Lab lab = oklab_of_hex(c);
      bool far = true;
      for (std::size_t i = labs.size() > compared ? labs.size() - compared : 0; i < labs.size();
           ++i)
        far = far && distance(lab, labs[i]) >= threshold;
      if (!far) continue;
      out.push_back(c);
      labs.push_back(lab);
      chosen.insert(c);
      ++k;
      break;
    }
  }
  return out;
}

}  // namespace gpuplug::tool
