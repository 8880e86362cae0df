"""Weather: current conditions, forecasts, coordinates and distances for known cities.

Deterministic and offline: the figures come from a built-in table of cities and their
climate, varied per city and day by a hash, so the same question on the same day gets
the same answer.
"""

from __future__ import annotations

import difflib
import hashlib
import math
from datetime import date, timedelta
from typing import Annotated, Any, Literal

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult
from pydantic import Field

from toolweave.adapters.demo_servers.serve import READS, main, reply

app = MCPServer("weather", instructions="Weather for well-known cities.", log_level="WARNING")

City = Annotated[str, Field(description="City name, e.g. 'Paris' or 'Paris, France'.")]
Units = Annotated[
    Literal["metric", "imperial"], Field(description="metric (°C, km/h) or imperial.")
]

# name: (country, latitude, longitude, mean temperature °C, seasonal swing °C, wet days share)
CITIES: dict[str, tuple[str, float, float, float, float, float]] = {
    "Amsterdam": ("Netherlands", 52.37, 4.90, 10.5, 7.0, 0.45),
    "Athens": ("Greece", 37.98, 23.73, 18.5, 8.5, 0.15),
    "Bangkok": ("Thailand", 13.76, 100.50, 28.5, 1.5, 0.35),
    "Berlin": ("Germany", 52.52, 13.40, 10.0, 9.5, 0.35),
    "Buenos Aires": ("Argentina", -34.60, -58.38, 18.0, 6.0, 0.25),
    "Cairo": ("Egypt", 30.04, 31.24, 22.5, 7.0, 0.02),
    "Cape Town": ("South Africa", -33.92, 18.42, 17.0, 4.5, 0.25),
    "Chicago": ("United States", 41.88, -87.63, 10.5, 14.0, 0.35),
    "London": ("United Kingdom", 51.51, -0.13, 11.5, 6.5, 0.45),
    "Los Angeles": ("United States", 34.05, -118.24, 18.5, 4.0, 0.10),
    "Madrid": ("Spain", 40.42, -3.70, 15.0, 9.5, 0.18),
    "Mexico City": ("Mexico", 19.43, -99.13, 17.0, 2.5, 0.35),
    "Milan": ("Italy", 45.46, 9.19, 13.5, 10.0, 0.28),
    "Mumbai": ("India", 19.08, 72.88, 27.5, 2.5, 0.30),
    "New York": ("United States", 40.71, -74.01, 13.0, 12.0, 0.33),
    "Paris": ("France", 48.86, 2.35, 12.5, 8.0, 0.38),
    "Reykjavik": ("Iceland", 64.15, -21.94, 5.0, 5.5, 0.55),
    "Rome": ("Italy", 41.90, 12.50, 16.0, 8.5, 0.22),
    "San Francisco": ("United States", 37.77, -122.42, 14.5, 3.0, 0.20),
    "Singapore": ("Singapore", 1.35, 103.82, 27.5, 1.0, 0.50),
    "Stockholm": ("Sweden", 59.33, 18.07, 7.5, 10.0, 0.40),
    "Sydney": ("Australia", -33.87, 151.21, 18.0, 5.0, 0.30),
    "Tokyo": ("Japan", 35.68, 139.69, 16.0, 10.0, 0.33),
    "Toronto": ("Canada", 43.65, -79.38, 9.0, 13.5, 0.35),
}
EARTH_RADIUS_KM = 6371.0


def _city(name: str) -> str:
    key = name.split(",")[0].strip().lower()
    for city in CITIES:
        if city.lower() == key:
            return city
    close = difflib.get_close_matches(key.title(), list(CITIES), n=3)
    hint = (
        f"; did you mean {', '.join(close)}?" if close else f"; known cities: {', '.join(CITIES)}"
    )
    raise ToolError(f"unknown city {name!r}{hint}")


def _noise(*parts: object) -> float:
    """A stable number in [0, 1) for the given key."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def _day_weather(city: str, day: date, units: str) -> dict[str, Any]:
    _, latitude, _, mean, swing, wet = CITIES[city]
    # Warmest around mid-July in the north, mid-January in the south.
    season = math.cos(2 * math.pi * (day.timetuple().tm_yday - 196) / 365.25)
    high = (
        mean
        + swing * (season if latitude >= 0 else -season)
        + 4 * (_noise(city, day, "t") - 0.5)
        + 3
    )
    low = high - 5 - 4 * _noise(city, day, "r")
    rain = _noise(city, day, "p") < wet
    cloudy = _noise(city, day, "c")
    if rain:
        condition = "snow" if high < 1 else "rain showers" if cloudy < 0.5 else "rain"
    else:
        condition = "sunny" if cloudy < 0.4 else "partly cloudy" if cloudy < 0.75 else "cloudy"
    wind = 5 + 30 * _noise(city, day, "w")
    if units == "imperial":
        high, low, wind = high * 9 / 5 + 32, low * 9 / 5 + 32, wind / 1.609
    return {
        "date": day.isoformat(),
        "condition": condition,
        "high": round(high),
        "low": round(low),
        "precipitation_chance": round(100 * (0.7 if rain else 0.1) * (0.5 + cloudy)),
        "wind": round(wind),
    }


def _units(units: str) -> dict[str, str]:
    metric = units == "metric"
    return {"temperature": "°C" if metric else "°F", "wind": "km/h" if metric else "mph"}


@app.tool(annotations=READS)
async def current_weather(city: City, units: Units = "metric") -> CallToolResult:
    """Current weather in a city: condition, temperature, wind."""
    name = _city(city)
    today = _day_weather(name, date.today(), units)
    temperature = round((today["high"] * 2 + today["low"]) / 3)
    return reply(
        {
            "city": name,
            "condition": today["condition"],
            "temperature": temperature,
            "wind": today["wind"],
            "units": _units(units),
        }
    )


@app.tool(annotations=READS)
async def forecast(
    city: City,
    days: Annotated[int, Field(description="How many days, starting today.", ge=1, le=7)] = 3,
    units: Units = "metric",
) -> CallToolResult:
    """Daily forecast for a city: condition, high and low, chance of rain."""
    name = _city(city)
    start = date.today()
    daily = [_day_weather(name, start + timedelta(days=n), units) for n in range(days)]
    return reply({"city": name, "days": daily, "units": _units(units)})


@app.tool(annotations=READS)
async def geocode(city: City) -> CallToolResult:
    """Country and coordinates of a city."""
    name = _city(city)
    country, latitude, longitude, *_ = CITIES[name]
    return reply({"city": name, "country": country, "latitude": latitude, "longitude": longitude})


@app.tool(annotations=READS)
async def distance(
    from_city: City,
    to_city: City,
    units: Annotated[Literal["km", "mi"], Field(description="km or miles.")] = "km",
) -> CallToolResult:
    """Great-circle distance between two cities."""
    a, b = _city(from_city), _city(to_city)
    lat1, lon1, lat2, lon2 = map(math.radians, (*CITIES[a][1:3], *CITIES[b][1:3]))
    h = (
        math.sin((lat2 - lat1) / 2) ** 2
        + math.cos(lat1) * math.cos(lat2) * math.sin((lon2 - lon1) / 2) ** 2
    )
    km = 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(h))
    value = km if units == "km" else km / 1.609344
    return reply({"from": a, "to": b, "distance": round(value), "units": units})


if __name__ == "__main__":
    main(app)
