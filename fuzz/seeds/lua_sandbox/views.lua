local t = state.items
table.insert(t, #state.items + 1)
table.sort(state.items, function(a, b) return a > b end)
for k, v in pairs(state.rows[1]) do state.count = state.count + 1 end
if next(state.rows) ~= nil then state.rows[1].tags = nil end
return {state, rawlen(t), rawget(state, "count")}
